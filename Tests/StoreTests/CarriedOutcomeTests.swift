import Alerts
import Core
import Foundation
import GRDB
import GRDBSQLite
import StoreContract
import Synchronization
import Testing

@testable import Store

/// A send's outcome waits for the next write and goes into the file with its commit, not with one of its own; with
/// no write in time it is written alone; a write that rolls back leaves it to its caller. Read from another
/// connection, which sees only what is committed.
@Suite struct CarriedOutcomeTests {
    struct EverythingToOneSink: AlertPlanner {
        func plan(_ e: RelayEvent) -> [PlannedDelivery] {
            [PlannedDelivery(sink: "s", rule: "r", kind: e.kind, urgency: .normal)]
        }
    }

    func state(_ db: DatabaseQueue, _ id: String) throws -> String? {
        try db.read { try String.fetchOne($0, sql: "SELECT state FROM delivery WHERE id = ?", arguments: [id]) }
    }

    /// A store with one delivery planned and handed over; another connection to read its file; the delivery's id.
    func oneDelivery() throws -> (Store, DatabaseQueue, String) {
        let store = try Store.open(path: temporaryStorePath())
        let handed = Mutex<[String]>([])
        store.setPlanner(EverythingToOneSink()) { rows in handed.withLock { $0 += rows.map(\.id) } }
        try store.raise(RelayEvent(kind: .connectionLost, at: Date(), detail: "only"))
        return (store, try DatabaseQueue(path: store.path), try #require(handed.withLock { $0.first }))
    }

    @Test func anOutcomeGoesIntoTheFileWithTheNextWritesCommit() async throws {
        let store = try Store.open(path: temporaryStorePath())
        let outside = try DatabaseQueue(path: store.path)
        // What the file says of the first delivery when the second one's commit hands it over.
        let firstAtTheSecondsCommit = Mutex<[String?]>([])
        let first = Mutex<String?>(nil)
        store.setPlanner(EverythingToOneSink()) { rows in
            guard let id = first.withLock({ $0 }) else { return first.withLock { $0 = rows.first?.id } }
            firstAtTheSecondsCommit.withLock { $0.append(try? self.state(outside, id)) }
        }
        try store.raise(RelayEvent(kind: .connectionLost, at: Date(), detail: "first"))
        let id = try #require(first.withLock { $0 })
        let recorded = Task { try await store.record([(id, .done(at: Date()))], withNextWriteWithin: .seconds(60)) }
        try await Task.sleep(for: .milliseconds(300))
        #expect(try state(outside, id) == "pending", "no commit of its own: it waits for the next write")
        try store.raise(RelayEvent(kind: .connectionLost, at: Date(), detail: "second"))
        try await recorded.value
        #expect(firstAtTheSecondsCommit.withLock { $0 } == ["delivered"], "in the file with the second's commit")
        #expect(try state(outside, id) == "delivered")
    }

    @Test func withNoWriteInTheWindowTheOutcomeIsWrittenAlone() async throws {
        let (store, outside, id) = try oneDelivery()
        try await store.record(
            [(id, .retry(error: "HTTP 503", at: Date(timeIntervalSinceNow: 30)))],
            withNextWriteWithin: .milliseconds(50))
        let row = try #require(
            try outside.read {
                try Row.fetchOne(
                    $0, sql: "SELECT state, attempts, last_error FROM delivery WHERE id = ?", arguments: [id])
            })
        #expect(row["state"] as String == "pending" && row["attempts"] as Int == 1)
        #expect(row["last_error"] as String? == "HTTP 503")
    }

    /// A COMMIT that SQLite rolls back by itself (a full disk does, while it appends the log; here a commit hook that
    /// refuses once): the write throws, the outcomes it carried are their caller's again (written by it, in the file
    /// when `record` returns), its planned rows go to no one, and the next write's commit claims nothing of it.
    /// (Before, the write told them from a GRDB transaction observer, which hears of commits through that same hook:
    /// here it heard of none and the caller waited for good; on a full disk it took the next write's commit for this.)
    @Test(.timeLimit(.minutes(1)))
    func aCommitSQLiteRollsBackByItselfGivesTheOutcomesBackAndHandsNothingOver() async throws {
        let store = try Store.open(path: temporaryStorePath())
        let outside = try DatabaseQueue(path: store.path)
        let handed = Mutex<[String]>([])
        store.setPlanner(EverythingToOneSink()) { rows in handed.withLock { $0 += rows.map(\.id) } }
        try store.raise(RelayEvent(kind: .connectionLost, at: Date(), detail: "first"))
        let id = try #require(handed.withLock { $0.first })
        let recorded = Task { try await store.record([(id, .done(at: Date()))], withNextWriteWithin: .seconds(60)) }
        for _ in 0..<200 where store.carried.isEmpty { try await Task.sleep(for: .milliseconds(10)) }  // left here
        commitRefusals.store(1, ordering: .relaxed)
        try await store.pool.writeWithoutTransaction { db in
            _ = sqlite3_commit_hook(
                db.sqliteConnection, { _ in commitRefusals.subtract(1, ordering: .relaxed).oldValue > 0 ? 1 : 0 }, nil)
        }
        #expect(throws: StoreError.self) {
            try store.raise(RelayEvent(kind: .connectionLost, at: Date(), detail: "refused"))
        }
        #expect(handed.withLock { $0.count } == 1, "the rolled-back write's row is handed to no one")
        try await recorded.value
        #expect(try state(outside, id) == "delivered", "written by its caller, in the file once `record` returned")
        try store.raise(RelayEvent(kind: .connectionLost, at: Date(), detail: "third"))
        #expect(handed.withLock { $0.count } == 2, "the next commit hands over its own row only")
    }

    /// A write takes the outcomes before its own rows (so they grow their rows while the page has room): when its
    /// own rows then fail, it rolls back and the outcomes are the caller's again, written by it at once, not left
    /// waiting for a window that has passed its write.
    @Test func aWriteThatFailsAfterTakingTheOutcomesGivesThemBack() async throws {
        struct Refused: Error {}
        let (store, outside, id) = try oneDelivery()
        let recorded = Task { try await store.record([(id, .done(at: Date()))], withNextWriteWithin: .seconds(60)) }
        for _ in 0..<200 where store.carried.isEmpty { try await Task.sleep(for: .milliseconds(10)) }  // left here
        #expect(throws: StoreError.self) {
            try store.write { db in
                try db.execute(sql: "INSERT INTO sync_state (key, value) VALUES ('refused', 'x')")
                throw Refused()
            }
        }
        var seen = try state(outside, id)
        for _ in 0..<200 where seen != "delivered" {
            try await Task.sleep(for: .milliseconds(50))
            seen = try state(outside, id)
        }
        #expect(seen == "delivered", "written by its caller once the write rolled back")
        guard seen == "delivered" else { return }  // the caller still waits: not for this test to wait with it
        try await recorded.value
        let refused = try await outside.read {
            try String.fetchOne($0, sql: "SELECT value FROM sync_state WHERE key = 'refused'")
        }
        #expect(refused == nil, "the failed write left nothing")
    }

    /// The outcomes a write took are the caller's again when that write rolls back, and once only: a write that
    /// commits later does not write them a second time.
    @Test func outcomesAWriteRolledBackAreTheCallersAgain() {
        let carried = CarriedOutcomes()
        let ticket = carried.leave([("d1", .done(at: Date()))], wake: Wakeup())
        let taken = carried.take()
        #expect(taken.map(\.ticket) == [ticket])
        #expect(carried.take().isEmpty, "held by the first write")
        guard case .inAWrite = carried.claim(ticket) else {
            Issue.record("a write holds them until its commit or rollback")
            return
        }
        carried.rolledBack([ticket])
        guard case .yours(let results) = carried.claim(ticket) else {
            Issue.record("rolled back: the caller writes them")
            return
        }
        #expect(results.map(\.id) == ["d1"])
        #expect(carried.take().isEmpty, "claimed: no later write takes them")
    }

    /// With several outcomes waiting, a write takes every one that no other write holds, each once, and holds them.
    @Test func aWriteTakesEachOutcomeNoOtherWriteHolds() {
        let carried = CarriedOutcomes()
        let first = carried.leave([("d1", .done(at: Date()))], wake: Wakeup())
        #expect(carried.take().map(\.ticket) == [first])
        let later = (2...5).map { carried.leave([("d\($0)", .done(at: Date()))], wake: Wakeup()) }
        let taken = carried.take()
        #expect(taken.count == 4)
        #expect(Set(taken.map(\.ticket)) == Set(later), "not the one the first write holds")
        #expect(Set(taken.flatMap { $0.results.map(\.id) }) == ["d2", "d3", "d4", "d5"])
        #expect(carried.take().isEmpty, "all held now")
        for ticket in later + [first] {
            guard case .inAWrite = carried.claim(ticket) else {
                Issue.record("outcome \(ticket): a write holds it until its commit")
                return
            }
        }
        carried.committed(later)
        guard case .written = carried.claim(later[0]) else {
            Issue.record("committed: written")
            return
        }
    }
}

/// How many commits the test's hook refuses (a C callback reaches no context but a global).
private let commitRefusals = Atomic<Int>(0)
