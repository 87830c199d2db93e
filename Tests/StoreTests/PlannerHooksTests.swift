import Alerts
import Foundation
import Synchronization
import Testing

@testable import Store

/// Each event reads the planner hooks. When the wake callback sat in the Mutex as a bare closure, every read
/// wrapped it in two more reabstraction thunks, and the first call after about 90,000 events overflowed the
/// stack (found by `make bench`: a segfault, no message). With the hooks boxed in a class it stays one closure.
@Suite struct PlannerHooksTests {
    struct EverythingToOneSink: AlertPlanner {
        func plan(_ e: RelayEvent) -> [PlannedDelivery] { [PlannedDelivery(sink: "s", rule: "r", kind: e.kind, urgency: .normal)] }
    }

    @Test func manyReadsOfTheHooksLeaveTheWakeCallbackCallable() throws {
        let store = try Store.open(path: temporaryStorePath())
        let woken = Atomic<Int>(0)
        store.setPlanner(EverythingToOneSink()) { _ in woken.add(1, ordering: .relaxed) }
        for _ in 0..<1_000_000 { #expect(store.plansAny(.transactionCreated)) }
        try store.raise(RelayEvent(kind: .connectionLost, at: Date(), detail: "test"))
        #expect(woken.load(ordering: .relaxed) == 1, "woken once, after the commit")
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
