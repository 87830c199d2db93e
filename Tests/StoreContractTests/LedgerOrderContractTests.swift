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
        RelayEvent(kind: .balanceUpdated, at: Date(), childId: child, childName: child == alice ? "Alice" : "Bob", balance: amount)
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
        #expect(try stores[1].mergeSuperseded(sink: "hook", child: bob, kind: .balanceUpdated, excluding: []).isEmpty, "Bob has one")
        let due = try stores[0].dueDeliveries(sink: "hook", at: Date().addingTimeInterval(1), limit: 10, excluding: [])
        #expect(try due.map { try $0.event.balance } == [12, 3], "the newest of each child, nothing merged")
        #expect(merged.isDisjoint(with: due.map(\.id)))

        // A row being sent is left alone: the newer ones merge among themselves.
        let sending = try #require(due.first)
        for amount in [13, 14] as [Decimal] { try stores[0].raise(balance(alice, amount)) }
        let second = try stores[0].mergeSuperseded(sink: "hook", child: alice, kind: .balanceUpdated, excluding: [sending.id])
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
        stores[0].setOrderedSinks(["hook"])  // a chat: one child's alerts in order, but a summary does not wait its turn
        for i in 1...6 {
            var e = RelayEvent(kind: .transactionCreated, at: Date(), childId: alice, childName: "Alice", detail: "chore \(i)")
            e.balance = Decimal(i)
            try stores[0].raise(e)
        }
        try stores[0].raise(RelayEvent(kind: .summary, at: Date(), childId: alice, childName: "Alice", balance: 6))
        let due = try stores[0].dueDeliveries(sink: "hook", at: Date().addingTimeInterval(1), limit: 2, excluding: [])
        #expect(due.map(\.kind) == [.summary, .transactionCreated], "the summary first, though planned last and past the limit")
        #expect(try due.last?.event.detail == "chore 1", "then the oldest")
    }

    @Test func sendingOrderPutsSummariesAndDigestsFirstThenTheOldest() {
        func d(_ kind: RelayEvent.Kind, _ seconds: Double) -> Delivery {
            Delivery(
                id: "\(kind.rawValue)-\(seconds)", sink: "chat", rule: "r", kind: kind, childId: alice, urgency: .normal, alert: "{}",
                digest: false, state: .pending, attempts: 0, nextAttemptAt: Date(timeIntervalSince1970: seconds),
                createdAt: Date(timeIntervalSince1970: seconds))
        }
        let sorted = [d(.balanceUpdated, 1), d(.transactionCreated, 2), d(.digest, 9), d(.summary, 5)].sorted(by: Delivery.sendingOrder)
        #expect(sorted.map(\.kind) == [.summary, .digest, .balanceUpdated, .transactionCreated])
    }
}
