import Alerts
import Foundation
import GRDB
import StoreContract
import Synchronization
import Testing

@testable import Store

/// Each event reads the planner hooks. When the wake callback sat in the Mutex as a bare closure, every read
/// wrapped it in two more reabstraction thunks, and the first call after about 90,000 events overflowed the
/// stack (found by `make bench`: a segfault, no message). With the hooks boxed in a class it stays one closure.
@Suite struct PlannerHooksTests {
    struct EverythingToOneSink: AlertPlanner {
        func plan(_ e: RelayEvent) -> [PlannedDelivery] {
            [PlannedDelivery(sink: "s", rule: "r", kind: e.kind, urgency: .normal)]
        }
    }

    @Test func manyReadsOfTheHooksLeaveTheWakeCallbackCallable() throws {
        let store = try Store.open(path: temporaryStorePath())
        let woken = Atomic<Int>(0)
        store.setPlanner(EverythingToOneSink()) { _ in woken.add(1, ordering: .relaxed) }
        for _ in 0..<1_000_000 { #expect(store.plansAny(.transactionCreated)) }
        try store.raise(RelayEvent(kind: .connectionLost, at: Date(), detail: "test"))
        #expect(woken.load(ordering: .relaxed) == 1, "woken once, after the commit")
    }

    /// A row handed over in memory carries its alert as a value: the worker reads nothing back. The same row read
    /// from the ledger carries none, and its stored text decodes to the same value.
    @Test func aHandedOverRowCarriesItsAlertAndTheLedgersDecodesToTheSame() throws {
        let store = try Store.open(path: temporaryStorePath())
        let handed = Mutex<[Delivery]>([])
        store.setPlanner(EverythingToOneSink()) { rows in handed.withLock { $0 += rows } }
        let event = RelayEvent(
            kind: .connectionLost, at: Date(timeIntervalSince1970: 1_764_000_000.25), detail: "hub away for 10 min")
        try store.raise(event)
        let row = try #require(handed.withLock { $0.first })
        #expect(row.carried == event)
        #expect(row.alert == event.jsonText())
        let read = try #require(try store.deliveries(sink: "s").first)
        #expect(read.id == row.id && read.carried == nil)
        #expect(try read.event == event)
    }

    /// Writes from two threads at once: each hand-over holds only rows that its own commit wrote (they are in the
    /// file when it comes), and the hand-overs come in the order of the commits.
    @Test func eachHandOverHoldsItsOwnCommittedRowsInCommitOrder() throws {
        let store = try Store.open(path: temporaryStorePath())
        let outside = try DatabaseQueue(path: store.path)  // another connection: sees only what is committed
        let handed = Mutex<[String]>([])
        let notYetInTheFile = Atomic<Int>(0)
        store.setPlanner(EverythingToOneSink()) { rows in
            let inFile =
                (try? outside.read { db in try Set(String.fetchAll(db, sql: "SELECT id FROM delivery")) }) ?? []
            notYetInTheFile.add(rows.count { !inFile.contains($0.id) }, ordering: .relaxed)
            handed.withLock { $0 += rows.map(\.id) }
        }
        DispatchQueue.concurrentPerform(iterations: 2) { thread in
            for i in 0..<150 {
                _ = try? store.raise(RelayEvent(kind: .connectionLost, at: Date(), detail: "\(thread)-\(i)"))
            }
        }
        let byCommit = try outside.read { db in try String.fetchAll(db, sql: "SELECT id FROM delivery ORDER BY rowid") }
        let handedOver = handed.withLock { $0 }
        #expect(byCommit.count == 300)
        #expect(notYetInTheFile.load(ordering: .relaxed) == 0)
        let firstDifference =
            Array(zip(handedOver, byCommit)).firstIndex { $0 != $1 }
            ?? (handedOver.count == byCommit.count ? nil : min(handedOver.count, byCommit.count))
        #expect(
            firstDifference == nil,
            "\(handedOver.count) handed over; the order differs from the commits' at \(firstDifference ?? -1)")
    }

    /// A key within its window plans once; rows without a key are not deduplicated (and since v11 are not in the
    /// dedup index at all), and the look-up still goes through that index.
    @Test func aDedupKeyPlansOnceWithinItsWindowAndItsLookUpUsesTheIndex() throws {
        struct KeyedByDetail: AlertPlanner {
            func plan(_ e: RelayEvent) -> [PlannedDelivery] {
                [
                    PlannedDelivery(
                        sink: "s", rule: "r", kind: e.kind, urgency: .normal, dedupKey: e.detail == "keyed" ? "k" : nil,
                        dedupWindow: 600)
                ]
            }
        }
        let store = try Store.open(path: temporaryStorePath())
        store.setPlanner(KeyedByDetail())
        #expect(try store.raise(RelayEvent(kind: .connectionLost, at: Date(), detail: "keyed")) == 1)
        #expect(
            try store.raise(RelayEvent(kind: .connectionLost, at: Date(), detail: "keyed")) == 0,
            "the same key within its window")
        #expect(try store.raise(RelayEvent(kind: .connectionLost, at: Date(), detail: "plain")) == 1)
        #expect(
            try store.raise(RelayEvent(kind: .connectionLost, at: Date(), detail: "plain")) == 1, "no key, no dedup")
        let outside = try DatabaseQueue(path: store.path)
        let plan = try outside.read { db in
            try Row.fetchAll(
                db,
                sql:
                    "EXPLAIN QUERY PLAN SELECT 1 FROM delivery WHERE sink = ? AND dedup_key = ? AND created_at >= ? LIMIT 1",
                arguments: ["s", "k", "2000-01-01"]
            ).map { $0["detail"] as String }
        }
        #expect(plan.contains { $0.contains("delivery_dedup") }, "\(plan)")
        let partial = try outside.read { db in
            try Bool.fetchOne(
                db, sql: "SELECT partial FROM pragma_index_list('delivery') WHERE name = 'delivery_dedup'")
        }
        #expect(partial == true, "rows without a key stay out of the index")
    }

    @Test func aRolledBackWriteWakesNobody() throws {
        let store = try Store.open(path: temporaryStorePath())
        let woken = Atomic<Int>(0)
        store.setPlanner(EverythingToOneSink()) { _ in woken.add(1, ordering: .relaxed) }
        struct Boom: Error {}
        #expect(throws: StoreError.self) {
            try store.write { db in
                try store.planDeliveries(db, RelayEvent(kind: .connectionLost, at: Date(), detail: "x"))
                throw Boom()
            }
        }
        try store.raise(RelayEvent(kind: .connectionLost, at: Date(), detail: "y"))
        #expect(woken.load(ordering: .relaxed) == 1)
        #expect(try store.deliveryCounts()["s"]?["pending"] == 1, "the rolled-back delivery is gone")
    }
}
