import Alerts
import AllowanceAPI
import Foundation
import StoreContract
import Testing

/// The optimistic outbox, once, on both stores: a write made here shows at once (its local transaction and its
/// effect on the balance), the server's copy replaces it once (from the answer or from the hub's echo, never both),
/// and a write refused for good is undone with an alert.
@Suite(.timeLimit(.minutes(2))) struct OutboxContractTests {
    let alice = Child(id: UUID(), firstName: "Alice", lastName: "A", weeklyAllowance: 5, currentBalance: 10)

    func balance(_ store: any RelayStorage) throws -> Decimal? {
        try store.children().first { $0.id == alice.id }?.currentBalance
    }

    /// The server's copy of a write: its own id, the balance after it as the server computed it.
    func serverCopy(of entry: OutboxEntry, balanceAfter: Decimal) -> Transaction {
        Transaction(
            id: UUID(), childId: entry.childId, amount: entry.amount, type: entry.type, description: entry.description,
            balanceAfter: balanceAfter, createdAt: Date(), createdByName: "allowance-relay")
    }

    /// The write the outbox drain takes next, marked as being sent.
    func sending(_ store: any RelayStorage) throws -> OutboxEntry {
        let due = try #require(try store.dueOutbox(at: Date()).first)
        try store.markInFlight(due.seq)
        return due
    }

    @Test(arguments: Backend.allCases)
    func aWriteShowsAtOnceAndTheServersAnswerReplacesIt(_ backend: Backend) async throws {
        let stores = try await backend.handles(1, planner: EveryEvent())
        defer { backend.close(stores) }
        let store = stores[0]
        try backend.seed(store, children: [alice], transactions: [])
        let entry = try store.enqueueTransaction(
            child: alice.id, amount: 2.5, type: .debit, description: "ice cream", limit: 100, at: Date())
        #expect(try balance(store) == 7.5, "the local balance counts the write at once")
        #expect(try store.transactions(child: alice.id, since: nil, limit: 10).map(\.id) == [entry.localTransactionId])
        let sent = try sending(store)
        #expect(sent.seq == entry.seq)
        try store.outboxSent(sent.seq, server: serverCopy(of: sent, balanceAfter: 7.5), at: Date())
        let listed = try store.transactions(child: alice.id, since: nil, limit: 10)
        #expect(
            listed.count == 1 && listed[0].id != entry.localTransactionId, "the server's copy replaced the local one")
        #expect(try balance(store) == 7.5)
        #expect(try store.outbox().map(\.state) == [.sent])
    }

    /// The server took the write but answered with a balance the cache cannot hold (a third decimal): its copy is
    /// set aside as one from the hub would be, with its alert, and the stand-in goes with its effect; the outbox row
    /// is closed (the server has the write: sending it again would make it twice).
    @Test(arguments: Backend.allCases)
    func anAnswerWithAThirdDecimalIsSetAsideAndTheWriteIsNotSentAgain(_ backend: Backend) async throws {
        let stores = try await backend.handles(1, planner: EveryEvent())
        defer { backend.close(stores) }
        let store = stores[0]
        try backend.seed(store, children: [alice], transactions: [])
        _ = try store.enqueueTransaction(
            child: alice.id, amount: 2.5, type: .debit, description: "ice cream", limit: 100, at: Date())
        let sent = try sending(store)
        let answer = serverCopy(of: sent, balanceAfter: Decimal(string: "7.505")!)
        try store.outboxSent(sent.seq, server: answer, at: Date())
        #expect(try store.outbox().map(\.state) == [.sent])
        #expect(try store.dueOutbox(at: Date().addingTimeInterval(3600)).isEmpty, "nothing to send again")
        #expect(try store.transactions(child: alice.id, since: nil, limit: 10).isEmpty, "neither copy is kept")
        #expect(try balance(store) == 10, "the stand-in's effect went with it")
        #expect(
            try store.rejectedRows().map(\.reason) == ["its balanceAfter 7.505 has more than two decimals"])
        let alerts = try store.deliveries(sink: "hook", state: nil, limit: 100)
        #expect(alerts.filter { $0.kind == .syncRejected }.count == 1)
        #expect(!alerts.contains { $0.kind == .transactionCreated })
    }

    @Test(arguments: Backend.allCases)
    func theHubsEchoOfTheWriteBeingSentIsCountedOnce(_ backend: Backend) async throws {
        let stores = try await backend.handles(1, planner: EveryEvent())
        defer { backend.close(stores) }
        let store = stores[0]
        try backend.seed(store, children: [alice], transactions: [])
        _ = try store.enqueueTransaction(
            child: alice.id, amount: 4, type: .credit, description: "chores", limit: 100, at: Date())
        _ = try store.enqueueTransaction(
            child: alice.id, amount: 1, type: .credit, description: "more", limit: 100, at: Date())
        #expect(try balance(store) == 15)
        let first = try sending(store)
        // The hub pushes the server's copy before the POST is answered: not a gap, and the stand-in goes.
        let echo = serverCopy(of: first, balanceAfter: 14)
        #expect(try store.apply([.transactionCreated(echo)], at: Date(), traceParents: []) == [.stored(gap: nil)])
        #expect(try balance(store) == 15, "the server's 14 and the write still waiting")
        let listed = try store.transactions(child: alice.id, since: nil, limit: 10).map(\.description).sorted()
        #expect(listed == ["chores", "more"], "the echo replaced its stand-in; the other write still shows")
        try store.outboxSent(first.seq, server: echo, at: Date())
        #expect(try balance(store) == 15, "the answer after the echo changes nothing")
        #expect(try store.transactions(child: alice.id, since: nil, limit: 10).count == 2)
    }

    /// Killed after the server took a write and before its answer was recorded: at the restart the write is pending
    /// again, the catch-up brings the server's copy (and the server's balance, which has it), and the write is sent
    /// again and answered with that same copy. The balance counts it once. (The catch-up added the write still
    /// waiting here on top of the server's balance; the answer must take that back when it removes the stand-in.)
    @Test(arguments: Backend.allCases)
    func aWriteTheServerTookBeforeACrashIsCountedOnceAfterTheCatchUpAndTheResend(_ backend: Backend) async throws {
        let stores = try await backend.handles(1, planner: EveryEvent())
        defer { backend.close(stores) }
        let store = stores[0]
        try backend.seed(store, children: [alice], transactions: [])
        _ = try store.enqueueTransaction(
            child: alice.id, amount: 3, type: .debit, description: "comic", limit: 100, at: Date())
        let sent = try sending(store)
        let copy = serverCopy(of: sent, balanceAfter: 7)  // the server took it; then kill -9
        // The restart puts the write back in line (as a retry does): it is no longer the one being sent.
        try store.outboxRetry(sent.seq, error: "the relay stopped while sending", retryAt: Date())
        var server = alice
        server.currentBalance = 7
        try store.storeCaughtUp(
            children: [server], transactions: [copy], rejected: [], cursors: [alice.id: copy.id], complete: true,
            balancesAskedAt: nil, history: false, historyTaken: nil, at: Date(), traceParent: nil)
        let resent = try sending(store)
        #expect(resent.seq == sent.seq)
        try store.outboxSent(resent.seq, server: copy, at: Date())
        #expect(try balance(store) == 7, "the server's balance, the write counted once")
        #expect(try store.transactions(child: alice.id, since: nil, limit: 10).map(\.id) == [copy.id])
    }

    @Test(arguments: Backend.allCases)
    func aWriteRefusedForGoodIsUndoneWithAnAlertAndCanBeQueuedAgain(_ backend: Backend) async throws {
        let stores = try await backend.handles(1, planner: EveryEvent())
        defer { backend.close(stores) }
        let store = stores[0]
        try backend.seed(store, children: [alice], transactions: [])
        let entry = try store.enqueueTransaction(
            child: alice.id, amount: 3, type: .debit, description: "toy", limit: 100, at: Date())
        #expect(try balance(store) == 7)
        let sent = try sending(store)
        try store.outboxRejected(sent.seq, reason: "HTTP 422: the child's account is closed", at: Date())
        #expect(try balance(store) == 10, "undone")
        #expect(try store.transactions(child: alice.id, since: nil, limit: 10).isEmpty)
        let alerts = try store.deliveries(sink: "hook", state: nil, limit: 10)
        #expect(alerts.map(\.kind) == [.outboxRejected])
        #expect(try alerts.first?.event.detail == "HTTP 422: the child's account is closed")
        try store.retryOutbox(entry.seq, at: Date())
        #expect(try balance(store) == 7, "queued again, with its effect")
        #expect(try store.outbox().map(\.state) == [.pending])
        try store.dropOutbox(entry.seq, at: Date())
        #expect(try balance(store) == 10 && store.outbox().isEmpty, "dropped and undone")
        do throws(StoreError) {
            _ = try store.enqueueTransaction(
                child: alice.id, amount: 11, type: .debit, description: "bike", limit: 100, at: Date())
            Issue.record("an overdraft was queued")
        } catch {
            #expect(error.message == "Insufficient funds: the balance is 10.00, the debit 11.00.")
        }
    }
}
