import Foundation
import GRDB
import StoreContract
import Testing

@testable import Store

/// A read runs in one SQLite transaction on a reader connection, with the BEGIN and COMMIT it compiles once per
/// connection: it sees one committed state throughout, and a read that fails ends its transaction, so the connection
/// it gives back starts the next read at the file's latest state.
@Suite struct ReadTransactionTests {
    private func probes(_ db: Database) throws -> Int {
        try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM sync_state WHERE key LIKE 'probe-%'") ?? -1
    }

    private func addProbe(_ store: Store, _ n: Int) throws {
        try store.write { db in
            try db.execute(sql: "INSERT INTO sync_state (key, value) VALUES (?, 'x')", arguments: ["probe-\(n)"])
        }
    }

    @Test func aReadSeesOneCommittedStateWhileAWriteCommits() throws {
        let store = try Store.open(path: temporaryStorePath())
        try addProbe(store, 1)
        let (before, during) = try store.read { db in
            let before = try probes(db)
            try addProbe(store, 2)  // the writer's connection commits while this read is open
            return (before, try probes(db))
        }
        #expect(before == 1)
        #expect(during == 1, "the read's second look saw the write committed after its first")
        #expect(try store.read { db in try probes(db) } == 2)
    }

    @Test func aFailedReadLeavesItsConnectionAtTheLatestState() throws {
        let store = try Store.open(path: temporaryStorePath())
        try addProbe(store, 1)
        // Kept connections are taken last in, first out: the reads below run on the one the failed read gave back.
        #expect(throws: StoreError.self) {
            try store.read { db in
                _ = try probes(db)
                return try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM no_such_table")
            }
        }
        try addProbe(store, 2)
        #expect(try store.read { db in try probes(db) } == 2)
        #expect(try store.read { db in try probes(db) } == 2)
    }
}
