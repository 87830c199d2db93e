import Alerts
import AllowanceAPI
import Foundation
import StoreContract
import TestSupport
import Testing

/// The ledger's order and merging, once, on both stores: a balance a newer one supersedes is merged, not sent;
/// summaries and digests are handed out before a backlog of routine alerts.
@Suite(.timeLimit(.minutes(2))) struct LedgerOrderContractTests {
    let alice = UUID()
    let bob = UUID()

    func balance(_ child: UUID, _ amount: Decimal) -> RelayEvent {
        RelayEvent(
            kind: .balanceUpdated, at: Date(), childId: child, childName: child == alice ? "Alice" : "Bob",
            balance: amount)
    }

    @Test(arguments: Backend.allCases)
    func aBalanceANewerOneSupersedesIsMergedIntoItPerChild(_ backend: Backend) async throws {
        let stores = try await backend.handles(2, planner: EveryEvent())
        defer { backend.close(stores) }
        for amount in [10, 11, 12] as [Decimal] { try stores[0].raise(balance(alice, amount)) }
        try stores[0].raise(balance(bob, 3))
        let merged = try stores[1].mergeSuperseded(sink: "hook", child: alice, kind: .balanceUpdated, excluding: [])
        #expect(merged.count == 2)
        #expect(try stores[0].deliveryCounts() == ["hook": ["pending": 2, "merged": 2]])
        #expect(
            try stores[1].mergeSuperseded(sink: "hook", child: bob, kind: .balanceUpdated, excluding: []).isEmpty,
            "Bob has one")
        let due = try stores[0].dueDeliveries(sink: "hook", at: Date().addingTimeInterval(1), limit: 10, excluding: [])
        #expect(try due.map { try $0.event.balance } == [12, 3], "the newest of each child, nothing merged")
        #expect(merged.isDisjoint(with: due.map(\.id)))

        // A row being sent is left alone: the newer ones merge among themselves.
        let sending = try #require(due.first)
        for amount in [13, 14] as [Decimal] { try stores[0].raise(balance(alice, amount)) }
        let second = try stores[0].mergeSuperseded(
            sink: "hook", child: alice, kind: .balanceUpdated, excluding: [sending.id])
        #expect(second.count == 1 && !second.contains(sending.id))
        try stores[0].record([(sending.id, .done(at: Date()))])
        let next = try stores[0].dueDeliveries(sink: "hook", at: Date().addingTimeInterval(1), limit: 10, excluding: [])
        #expect(try next.map { try $0.event.balance }.contains(14))
        #expect(try !next.map { try $0.event.balance }.contains(13))
    }

    @Test(arguments: Backend.allCases)
    func aSummaryIsHandedOutBeforeABacklogOfRoutineAlerts(_ backend: Backend) async throws {
        let stores = try await backend.handles(2, planner: EveryEvent())
        defer { backend.close(stores) }
        // a chat: one child's alerts in order, but a summary does not wait its turn
        stores[0].setOrderedSinks(["hook"])
        for i in 1...6 {
            var e = RelayEvent(
                kind: .transactionCreated, at: Date(), childId: alice, childName: "Alice", detail: "chore \(i)")
            e.balance = Decimal(i)
            try stores[0].raise(e)
        }
        try stores[0].raise(RelayEvent(kind: .summary, at: Date(), childId: alice, childName: "Alice", balance: 6))
        let due = try stores[0].dueDeliveries(sink: "hook", at: Date().addingTimeInterval(1), limit: 2, excluding: [])
        #expect(
            due.map(\.kind) == [.summary, .transactionCreated],
            "the summary first, though planned last and past the limit")
        #expect(try due.last?.event.detail == "chore 1", "then the oldest")
    }

    /// A burst of the hub's transactions plans its alerts in one commit, many in the same millisecond: they fall due
    /// in the order of the transactions, whatever breaks the tie of their times (the order the file stored them in,
    /// the shared database's sequence; a key of ids random within a millisecond failed here).
    @Test(arguments: Backend.allCases)
    func aBurstsAlertsPlannedInOneMillisecondAreDueInTheirOrder(_ backend: Backend) async throws {
        let stores = try await backend.handles(1, planner: EveryEvent())
        defer { backend.close(stores) }
        let child = Child(id: alice, firstName: "Alice", lastName: "A", weeklyAllowance: 5, currentBalance: 0)
        try backend.seed(stores[0], children: [child], transactions: [])
        let instant = Date()
        let burst = (1...40).map { n in
            HubEvent.transactionCreated(
                Transaction(
                    id: UUID(), childId: alice, amount: 1, type: .credit, description: "chore \(n)",
                    balanceAfter: Decimal(n), createdAt: instant, createdByName: "Parent"))
        }
        _ = try stores[0].apply(burst, at: instant, traceParents: [])
        let due = try stores[0].dueDeliveries(sink: "hook", at: Date().addingTimeInterval(1), limit: 100, excluding: [])
        #expect(try due.map { try $0.event.transaction?.description } == (1...40).map { "chore \($0)" })
    }

    /// A sink's failure, recorded by the replica whose worker saw it, is what every handle reads; a dead letter queued
    /// again (`deliveries retry`) is due at once, and lifts the sink's shared pause.
    @Test(arguments: Backend.allCases)
    func aFailingSinkIsSeenByEveryHandleAndARetryIsDueAtOnce(_ backend: Backend) async throws {
        let stores = try await backend.handles(2, planner: EveryEvent())
        defer { backend.close(stores) }
        let since = Date(timeIntervalSince1970: 1_790_000_000)
        #expect(try stores[1].sinkHealth().isEmpty)
        try stores[0].setSinkHealth(
            "hook", SinkHealth(failingSince: since, lastError: "HTTP 400: no", deadLettering: true))
        #expect(
            try stores[1].sinkHealth() == [
                "hook": SinkHealth(failingSince: since, lastError: "HTTP 400: no", deadLettering: true)
            ])
        #expect(try stores[1].disabledSinks().isEmpty, "failing is not switched off")

        try stores[0].raise(balance(alice, 1))
        let due = try stores[0].dueDeliveries(sink: "hook", at: Date().addingTimeInterval(1), limit: 10, excluding: [])
        try stores[0].record(due.map { ($0.id, .gaveUp(reason: "HTTP 400: no")) })
        try stores[0].pauseSink("hook", until: Date().addingTimeInterval(600))
        #expect(try stores[1].retryDeliveries(id: nil, sink: "hook", at: Date()) == 1)
        let again = try stores[1].dueDeliveries(
            sink: "hook", at: Date().addingTimeInterval(1), limit: 10, excluding: [])
        #expect(again.map(\.id) == due.map(\.id), "due at once, the pause lifted")

        try stores[1].setSinkHealth("hook", nil)
        #expect(try stores[0].sinkHealth().isEmpty, "works again")
    }

    /// Held rows (quiet hours) are found, and re-planned: one due now, one muted; a row already tried is left alone.
    @Test(arguments: Backend.allCases)
    func heldDeliveriesAreFoundAndPlannedAgain(_ backend: Backend) async throws {
        let stores = try await backend.handles(2, planner: Holding())
        defer { backend.close(stores) }
        for amount in [1, 2, 3] as [Decimal] {
            try stores[0].raise(RelayEvent(kind: .transactionCreated, at: Date(), childId: alice, balance: amount))
        }
        let held = try stores[1].heldDeliveries(dueAfter: Date().addingTimeInterval(60))
        #expect(held.count == 3)
        #expect(
            try stores[1].heldDeliveries(dueAfter: Date().addingTimeInterval(7200)).isEmpty, "held for an hour only")
        let now = Date()
        try stores[1].replanHeld([(held[0].id, .due(now)), (held[1].id, .muted("muted"))])
        #expect(try stores[0].deliveryCounts() == ["hook": ["pending": 2, "muted": 1]])
        let due = try stores[0].dueDeliveries(sink: "hook", at: now.addingTimeInterval(1), limit: 10, excluding: [])
        #expect(due.map(\.id) == [held[0].id])
        #expect(try stores[0].heldDeliveries(dueAfter: now.addingTimeInterval(60)).map(\.id) == [held[2].id])
    }

    @Test func aFailingSinkIsUnhealthyAtOnceWhenItDeadLettersAndAfterTheThresholdOtherwise() {
        let since = Date(timeIntervalSince1970: 1_790_000_000)
        let failing = SinkHealth(failingSince: since, lastError: "HTTP 500", deadLettering: false)
        #expect(failing.unhealthyReason(sink: "hook", at: since.addingTimeInterval(899), after: 900) == nil)
        #expect(
            failing.unhealthyReason(sink: "hook", at: since.addingTimeInterval(900), after: 900)?.hasPrefix(
                "sink hook failing since") == true)
        var dead = failing
        dead.deadLettering = true
        #expect(
            dead.unhealthyReason(sink: "hook", at: since, after: 900)?.hasPrefix("sink hook dead-letters since") == true
        )
    }

    @Test func sendingOrderPutsSummariesAndDigestsFirstThenTheOldest() {
        func d(_ kind: RelayEvent.Kind, _ seconds: Double) -> Delivery {
            Delivery(
                id: "\(kind.rawValue)-\(seconds)", sink: "chat", rule: "r", kind: kind, childId: alice,
                urgency: .normal, alert: "{}",
                digest: false, state: .pending, attempts: 0, nextAttemptAt: Date(timeIntervalSince1970: seconds),
                createdAt: Date(timeIntervalSince1970: seconds))
        }
        let sorted = [d(.balanceUpdated, 1), d(.transactionCreated, 2), d(.digest, 9), d(.summary, 5)].sorted(
            by: Delivery.sendingOrder)
        #expect(sorted.map(\.kind) == [.summary, .digest, .balanceUpdated, .transactionCreated])
    }
}

/// Holds every event's delivery for an hour, as quiet hours do.
struct Holding: AlertPlanner {
    func plan(_ event: RelayEvent) -> [PlannedDelivery] {
        var p = PlannedDelivery(sink: "hook", rule: "all", kind: event.kind, urgency: .normal)
        p.notBefore = Date().addingTimeInterval(3600)
        return [p]
    }
}
