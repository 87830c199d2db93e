import Alerts
import AllowanceAPI
import Config
import Foundation
import Logging
import Relay
import Store
import StoreContract
import TestSupport
import Testing

/// Quiet hours (UTC) from an hour ago to an hour from now: whatever the time of the run, they hold now.
func quietHoursAroundNow() -> String {
    var utc = Calendar(identifier: .gregorian)
    utc.timeZone = TimeZone(identifier: "UTC")!
    let hm = { (d: Date) in
        String(format: "%02d:%02d", utc.component(.hour, from: d), utc.component(.minute, from: d))
    }
    return "\(hm(Date().addingTimeInterval(-3600)))-\(hm(Date().addingTimeInterval(3600)))"
}

/// Alerts settings with one webhook sink `name` on the receiver at `base`, quiet during `quietHours` when given.
func webhookSink(_ name: String, at base: URL, quietHours: String?) -> String {
    "relay:\n  time_zone: UTC\nsinks:\n  \(name):\n    type: webhook\n    url: \(base.appending(path: name))\n"
        + (quietHours.map { "    quiet_hours: \"\($0)\"\n" } ?? "")
}

/// A new store that holds Alice, with 50.
func storeWithAlice() throws -> Store {
    let store = try Store.open(path: temporaryPath())
    try store.storeCaughtUp(
        children: [Child(id: alice, firstName: "Alice", lastName: "E", weeklyAllowance: 10, currentBalance: 50)],
        transactions: [])
    return store
}

/// Alice spends 1 from the hub, leaving `after`; the event is stored as new.
func spendOne(_ store: Store, leaving after: Int) throws {
    let t = Transaction(
        id: UUID(), childId: alice, amount: 1, type: .debit, description: "item", balanceAfter: Decimal(after),
        createdAt: Date(), createdByName: "Pat")
    #expect(try store.apply(.transactionCreated(t)) != .duplicate)
}

/// A chat in a busy hour: what waits for a rate-limited chat is merged where a newer alert supersedes it, so the
/// family reads the balance once, as it is, not every step of it.
@Suite(.serialized, .timeLimit(.minutes(1))) struct CalmChatTests {
    let logger: Logger = {
        var l = Logger(label: "relay-test")
        l.logLevel =
            ProcessInfo.processInfo.environment["ALLOWANCE_TEST_LOG"].flatMap(Logger.Level.init(rawValue:)) ?? .critical
        return l
    }()

    /// Quiet hours shortened by a reload release what they held at once (it waited for the old end), and a mute
    /// set while alerts are held keeps them from going out when the hours end.
    @Test func aReloadAndAMuteApplyToWhatQuietHoursHold() async throws {
        let hook = WebhookReceiver()
        try await hook.run { base in
            let quiet = quietHoursAroundNow()
            let yaml = { (quietHours: String?) in webhookSink("hook", at: base, quietHours: quietHours) }
            let store = try storeWithAlice()
            let engine = RelayEngine(
                store: store, config: try AlertSettings.parse(yaml(quiet), file: "t.yaml"), logger: logger)
            try engine.install()
            let task = Task { await engine.run() }
            defer { task.cancel() }
            func spend(_ after: Int) throws { try spendOne(store, leaving: after) }
            try spend(49)
            try spend(48)
            // Both planned, and the worker parked with nothing under way: had it sent a held alert, it would have.
            #expect(
                try await eventually(.seconds(10)) {
                    try store.deliveryCounts()["hook"]?["pending"] == 2 && engine.sinksAreSettled
                })
            #expect(hook.received.isEmpty, "held by quiet hours")

            _ = engine.reload(try AlertSettings.parse(yaml(nil), file: "t.yaml"))
            _ = await eventually(.seconds(10)) { hook.received.count >= 2 }
            #expect(hook.received.count == 2, "released by the reload, not at the old end of the quiet hours")

            _ = engine.reload(try AlertSettings.parse(yaml(quiet), file: "t.yaml"))
            try spend(47)
            try store.mute(Mute(sink: "hook", childId: alice, until: Date().addingTimeInterval(7200)))
            engine.mutesChanged()
            _ = engine.reload(try AlertSettings.parse(yaml(nil), file: "t.yaml"))
            #expect(
                try await eventually(.seconds(10)) {
                    try store.deliveryCounts()["hook"]?["muted"] == 1 && engine.sinksAreSettled
                })
            #expect(hook.received.count == 2, "the muted child's held alert stays unsent")
        }
    }

    /// A reload that removes a sink with alerts held for it says how many wait for it, counting only the owed ones:
    /// the two held by quiet hours, not the one already delivered.
    @Test func aReloadThatRemovesASinkSaysHowManyAlertsWaitForIt() async throws {
        let hook = WebhookReceiver()
        try await hook.run { base in
            let sinks = { (name: String, quietHours: String?) in webhookSink(name, at: base, quietHours: quietHours) }
            let store = try storeWithAlice()
            let engine = RelayEngine(
                store: store, config: try AlertSettings.parse(sinks("hook", nil), file: "t.yaml"), logger: logger)
            try engine.install()
            let task = Task { await engine.run() }
            defer { task.cancel() }
            func spend(_ after: Int) throws { try spendOne(store, leaving: after) }
            try spend(49)
            #expect(try await eventually(.seconds(10)) { try store.deliveryCounts()["hook"]?["delivered"] == 1 })
            _ = engine.reload(try AlertSettings.parse(sinks("hook", quietHoursAroundNow()), file: "t.yaml"))
            try spend(48)
            try spend(47)
            #expect(
                try await eventually(.seconds(10)) {
                    try store.deliveryCounts()["hook"]?["pending"] == 2 && engine.sinksAreSettled
                })
            let summary = engine.reload(try AlertSettings.parse(sinks("other", nil), file: "t.yaml"))
            #expect(summary.removed == ["hook"] && summary.added == ["other"])
            #expect(summary.orphaned.map(\.sink) == ["hook"] && summary.orphaned.map(\.pending) == [2])
        }
    }

    /// Eight transactions wait for a Slack channel limited to a few messages a second (a backlog, as behind Slack's
    /// 1/s): each transaction goes out (one burst message, edited), and the balance message is posted once, with the
    /// balance as it is now; the seven balances it superseded are merged, not sent.
    @Test func aBacklogSendsEachTransactionAndTheBalanceOnceAsItIsNow() async throws {
        let standIn = ChatStandIn(.slack)
        let receiver = WebhookReceiver { r, _ in standIn.answer(r) }
        try await receiver.run { base in
            let yaml =
                standIn.yaml(base)
                + "    rate_limit: 20/s\nrules:\n  - event: [transaction.created, balance.updated]\n    to: [chat]\n"
            let config = try AlertSettings.parse(yaml, file: "t.yaml")
            let store = try Store.open(path: temporaryPath())
            try store.storeCaughtUp(
                children: [
                    Child(id: alice, firstName: "Alice", lastName: "E", weeklyAllowance: 10, currentBalance: 50)
                ], transactions: [])
            let engine = RelayEngine(store: store, config: config, logger: logger)
            try engine.install()
            for i in 1...8 {  // planned before the workers start: a backlog
                let t = Transaction(
                    id: UUID(), childId: alice, amount: 1, type: .debit, description: "item \(i)",
                    balanceAfter: Decimal(50 - i),
                    createdAt: Date(), createdByName: "Pat")
                #expect(try store.apply(.transactionCreated(t)) != .duplicate)
            }
            let task = Task { await engine.run() }
            defer { task.cancel() }
            _ = try await eventually(.seconds(20)) { try (store.deliveryCounts()["chat"]?["pending"] ?? 0) == 0 }
            // Every worker parked with nothing under way: a late send would have happened.
            #expect(
                try await eventually(.seconds(10)) {
                    try engine.sinksAreSettled && store.deliveryCounts()["chat"]?["in_flight"] == nil
                })
            #expect(standIn.problems.isEmpty, "\(standIn.problems)")
            // What a failure needs to be read: every request as the stand-in saw it, and each delivery's state.
            let requests = receiver.received.map { "\($0.method) \($0.path)" }
            let states = try store.deliveryCounts()["chat"] ?? [:]
            #expect(
                standIn.posts + standIn.edits == 9,
                "8 transactions and 1 balance, not \(standIn.posts + standIn.edits) sends: \(requests), \(states)")
            let balance = try #require(standIn.fullChat.first { $0.localizedCaseInsensitiveContains("balance") })
            #expect(balance.contains("42.00"), "the balance as it is now: \(balance)")
            #expect(
                try store.deliveries(sink: "chat", state: .merged).map(\.kind)
                    == Array(repeating: .balanceUpdated, count: 7))
        }
    }
}
