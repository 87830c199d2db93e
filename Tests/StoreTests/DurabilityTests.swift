import Foundation
import GRDB
import Testing

@testable import Store

/// `store.durability` is what SQLite's writer connection runs at: FULL (2) makes every commit wait for the disk,
/// NORMAL (1) does not. GRDB turns its writer to NORMAL when it sets WAL up, after the connection's own set-up, and
/// so the relay's commits had not waited for the disk at all. Read from SQLite itself (`PRAGMA synchronous` on the
/// connection that commits), on a new file and on one opened again.
@Suite struct DurabilityTests {
    private func writerLevel(_ store: Store) throws -> Int? {
        try store.write { db in try Int.fetchOne(db, sql: "PRAGMA synchronous") }
    }

    @Test func theWriterCommitsAtTheConfiguredLevel() throws {
        let path = temporaryStorePath()
        do {
            let store = try Store.open(path: path)  // the default: FULL
            #expect(try writerLevel(store) == 2)
        }
        do {
            let again = try Store.open(path: path)
            #expect(try writerLevel(again) == 2)
        }
        let normal = try Store.open(path: temporaryStorePath(), durability: .normal)
        #expect(try writerLevel(normal) == 1)
    }

    /// A send's outcome is committed without waiting for the disk (a power cut may forget it at no cost); the
    /// event's commit after it waits again.
    @Test func anOutcomeWrittenWithoutSyncLeavesTheLevelAsConfigured() throws {
        let store = try Store.open(path: temporaryStorePath())
        let during = try store.writeWithoutSync { db in try Int.fetchOne(db, sql: "PRAGMA synchronous") }
        #expect(during == 1)
        #expect(try writerLevel(store) == 2)
    }
}
