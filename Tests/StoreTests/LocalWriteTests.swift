import Alerts
import AllowanceAPI
import Foundation
import Testing

@testable import Store

/// A write made here (`transaction add`, the outbox) and the server's copy of it coming back, by the POST's
/// answer or by the hub first: the balance is counted once, the alert says what the balance was before it,
/// and nothing looks like a gap in the cache.
@Suite struct LocalWriteTests {
    struct EverythingToOneSink: AlertPlanner {
        func plan(_ e: RelayEvent) -> [PlannedDelivery] {
            [PlannedDelivery(sink: "s", rule: "r", kind: e.kind, urgency: .normal)]
        }
    }

    private func seeded() throws -> Store {
        let store = try Store.open(path: temporaryStorePath())
        try store.storeCaughtUp(children: [child("25.50")], transactions: [])
        store.setPlanner(EverythingToOneSink())
        return store
    }

    private func balance(_ store: Store) throws -> Decimal? { try store.children().first?.currentBalance }

    private func server(amount: String, after: String, description: String = "Chores") -> Transaction {
        var t = transaction(9, amount: amount, after: after)
        t.description = description
        return t
    }

    @Test func theAnswerToAWriteCarriesTheBalanceBeforeIt() throws {
        let store = try seeded()
        let e = try store.enqueueTransaction(child: alice, amount: 5, type: .credit, description: "Chores")
        try store.markInFlight(e.seq)
        try store.outboxSent(e.seq, server: server(amount: "5", after: "30.50"))
        let alert = try #require(try store.deliveries(sink: "s").first { $0.kind == .transactionCreated })
        #expect(try alert.event.balance == Decimal(string: "30.50")!)
        #expect(try alert.event.previousBalance == Decimal(string: "25.50")!, "not the optimistic 30.50")
        #expect(try balance(store) == Decimal(string: "30.50")!)
    }

    @Test func theHubEchoOfTheWriteInFlightIsNotAGapAndIsCountedOnce() throws {
        let store = try seeded()
        let e = try store.enqueueTransaction(child: alice, amount: 5, type: .credit, description: "Chores")
        try store.markInFlight(e.seq)
        let copy = server(amount: "5", after: "30.50")
        #expect(try store.apply(.transactionCreated(copy)) == .stored(gap: nil))
        #expect(try balance(store) == Decimal(string: "30.50")!)
        #expect(try store.transactions().map(\.id) == [copy.id], "the local stand-in is gone")
        let alert = try #require(try store.deliveries(sink: "s").first { $0.kind == .transactionCreated })
        #expect(try alert.event.previousBalance == Decimal(string: "25.50")!)
        try store.outboxSent(e.seq, server: copy)
        #expect(try balance(store) == Decimal(string: "30.50")!)
        #expect(
            try store.deliveries(sink: "s").filter { $0.kind == .transactionCreated }.count == 1,
            "one alert for one write")
        #expect(try store.outbox().first?.state == .sent)
    }

    @Test func anotherTransactionWhileAWriteWaitsKeepsTheWriteInTheBalance() throws {
        let store = try seeded()
        _ = try store.enqueueTransaction(child: alice, amount: 5, type: .credit, description: "Chores")  // 30.50 here
        // Meanwhile the server booked a debit of 1.00 on its 25.50.
        #expect(
            try store.apply(
                .transactionCreated(server(amount: "1", after: "24.50", description: "Candy").with(type: .debit)))
                == .stored(gap: nil))
        #expect(try balance(store) == Decimal(string: "29.50")!, "the server's 24.50 plus the 5.00 still waiting")
        #expect(
            try store.apply(.balanceUpdated(childId: alice, balance: Decimal(string: "24.50")!)) == .stored(gap: nil))
        #expect(try balance(store) == Decimal(string: "29.50")!)
    }

    @Test func aWriteGivenUpAfterItsEchoDoesNotUndoTheServersBalance() throws {
        let store = try seeded()
        let e = try store.enqueueTransaction(child: alice, amount: 5, type: .credit, description: "Chores")
        try store.markInFlight(e.seq)
        _ = try store.apply(.transactionCreated(server(amount: "5", after: "30.50")))
        try store.outboxDead(e.seq, reason: "gave up")
        #expect(try balance(store) == Decimal(string: "30.50")!, "the server has it: nothing local to undo")
    }

    @Test func aWriteWaitingForARetryHoldsBackTheLaterWritesForTheSameChild() throws {
        let store = try seeded()
        let bob = UUID(uuidString: "22222222-2222-4222-8222-222222222222")!
        try store.storeCaughtUp(
            children: [
                child("25.50"),
                Child(id: bob, firstName: "Bob", lastName: "Example", weeklyAllowance: 5, currentBalance: 3),
            ],
            transactions: [])
        let first = try store.enqueueTransaction(child: alice, amount: 1, type: .credit, description: "#1")
        let second = try store.enqueueTransaction(child: alice, amount: 2, type: .credit, description: "#2")
        let other = try store.enqueueTransaction(child: bob, amount: 1, type: .credit, description: "Bob's")
        #expect(try store.dueOutbox().map(\.seq) == [first.seq, second.seq, other.seq])
        try store.markInFlight(first.seq)
        try store.outboxRetry(first.seq, error: "HTTP 503", retryAt: Date().addingTimeInterval(60))
        #expect(try store.dueOutbox().map(\.seq) == [other.seq], "#2 waits for #1; Bob's write is not held")
        let next = try #require(try store.nextOutboxAttempt())
        #expect(next > Date().addingTimeInterval(50), "the next retry is #1's, not the past time of #2 held behind it")
        #expect(try store.outboxDueNow() == 1)
        #expect(try store.dueOutbox().map(\.seq) == [first.seq, second.seq, other.seq])
    }
}

extension Transaction {
    fileprivate func with(type: TransactionType) -> Transaction {
        var t = self
        t.type = type
        return t
    }
}
