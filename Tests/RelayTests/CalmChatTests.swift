import Alerts
import AllowanceAPI
import Foundation
import Logging
import Relay
import Store
import StoreContract
import TestSupport
import Testing

/// A chat in a busy hour: what waits for a rate-limited chat is merged where a newer alert supersedes it, so the
/// family reads the balance once, as it is, not every step of it.
@Suite(.serialized, .timeLimit(.minutes(1))) struct CalmChatTests {
    let logger: Logger = {
        var l = Logger(label: "relay-test")
        l.logLevel = ProcessInfo.processInfo.environment["ALLOWANCE_TEST_LOG"].flatMap(Logger.Level.init(rawValue:)) ?? .critical
        return l
    }()

    /// Eight transactions wait for a Slack channel limited to a few messages a second (a backlog, as behind Slack's
    /// 1/s): each transaction goes out (one burst message, edited), and the balance message is posted once, with the
    /// balance as it is now; the seven balances it superseded are merged, not sent.
    @Test func aBacklogSendsEachTransactionAndTheBalanceOnceAsItIsNow() async throws {
        let standIn = ChatStandIn(.slack)
        let receiver = WebhookReceiver { r, _ in standIn.answer(r) }
        try await receiver.run { base in
            let yaml = standIn.yaml(base) + "    rate_limit: 20/s\nrules:\n  - event: [transaction.created, balance.updated]\n    to: [chat]\n"
            let config = try RelayConfig.parse(yaml, file: "t.yaml")
            let store = try Store.open(path: temporaryPath())
            try store.storeCaughtUp(
                children: [Child(id: alice, firstName: "Alice", lastName: "E", weeklyAllowance: 10, currentBalance: 50)], transactions: [])
            let engine = RelayEngine(store: store, config: config, logger: logger)
            try engine.install()
            for i in 1...8 {  // planned before the workers start: a backlog
                let t = Transaction(
                    id: UUID(), childId: alice, amount: 1, type: .debit, description: "item \(i)", balanceAfter: Decimal(50 - i),
                    createdAt: Date(), createdByName: "Pat")
                #expect(try store.apply(.transactionCreated(t)) != .duplicate)
            }
            let task = Task { await engine.run() }
            defer { task.cancel() }
            let deadline = ContinuousClock.now + .seconds(20)
            while try (store.deliveryCounts()["chat"]?["pending"] ?? 0) > 0, ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(20))
            }
            try await Task.sleep(for: .milliseconds(300))  // a late send would show here
            #expect(standIn.problems.isEmpty, "\(standIn.problems)")
            #expect(standIn.posts + standIn.edits == 9, "8 transactions and 1 balance, not \(standIn.posts + standIn.edits) sends")
            let balance = try #require(standIn.fullChat.first { $0.localizedCaseInsensitiveContains("balance") })
            #expect(balance.contains("42.00"), "the balance as it is now: \(balance)")
            #expect(try store.deliveries(sink: "chat", state: .merged).map(\.kind) == Array(repeating: .balanceUpdated, count: 7))
        }
    }
}
