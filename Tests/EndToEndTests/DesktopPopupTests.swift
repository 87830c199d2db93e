import AllowanceAPI
import Config
import Foundation
import SignalRProtocol
import Store
import TestSupport
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// A private headless desktop (Xvfb, a session bus, dunst) from Tests/Desktop/desktop-session.sh.
final class DesktopSession {
    let dir = FileManager.default.temporaryDirectory.appending(path: "desktop-\(UUID())").path
    private(set) var env: [String: String] = [:]
    static let script = PythonPeer.root.appending(path: "Tests/Desktop/desktop-session.sh").path

    /// Popups stay until the test closes them: a loaded machine must not see one expire (dunst's default is 10 s)
    /// between the alerts that replace it, or before the test looks.
    static let keepPopups =
        "[urgency_low]\n    timeout = 0\n[urgency_normal]\n    timeout = 0\n[urgency_critical]\n    timeout = 0\n"

    /// `dunstrc`: more of dunst's configuration (a `[global]` section, say).
    init(notifier: Bool = true, dunstrc: String = "") async throws {
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        try (dunstrc + "\n" + Self.keepPopups).write(toFile: dir + "/dunstrc", atomically: true, encoding: .utf8)
        let out = try await runCommand([Self.script, "start", dir] + (notifier ? [] : ["--no-notifier"]))
        for line in out.split(separator: "\n") {
            let kv = line.split(separator: "=", maxSplits: 1).map(String.init)
            if kv.count == 2 { env[kv[0]] = kv[1] }
        }
        guard env["DBUS_SESSION_BUS_ADDRESS"] != nil else { throw HarnessError("no desktop session: \(out)") }
    }

    /// Keeps a screenshot for people to look at (.build/test-artifacts/NAME.png).
    func screenshot(_ name: String) async {
        _ = try? await runCommand([Self.script, "shot", dir])
        let artifacts = PythonPeer.root.appending(path: ".build/test-artifacts")
        try? FileManager.default.createDirectory(at: artifacts, withIntermediateDirectories: true)
        try? FileManager.default.removeItem(at: artifacts.appending(path: "\(name).png"))
        try? FileManager.default.copyItem(
            atPath: dir + "/desktop.png", toPath: artifacts.appending(path: "\(name).png").path)
    }

    /// The popups dunst showed: closes them all, then reads its history (summary, body, app name, and the image or
    /// icon it drew: an `image-path` hint's file, else the icon's).
    func popups() async throws -> [(summary: String, body: String, app: String, icon: String)] {
        _ = try await runCommand(["dunstctl", "close-all"], env: env)
        guard await eventually(.seconds(10), { (try? await displayed()) == 0 }) else {
            throw HarnessError("dunst kept popups on the screen after close-all")
        }
        let history = try await runCommand(["dunstctl", "history"], env: env)
        let json = try JSONValue(parsing: Array(history.utf8))
        return (json["data"]?.arrayValue?.first?.arrayValue ?? []).map { n in
            (
                n["summary"]?["data"]?.stringValue ?? "", n["body"]?["data"]?.stringValue ?? "",
                n["appname"]?["data"]?.stringValue ?? "", n["icon_path"]?["data"]?.stringValue ?? ""
            )
        }
    }

    /// How many popups are on the screen now (without closing them).
    func displayed() async throws -> Int {
        let count = try await runCommand(["dunstctl", "count", "displayed"], env: env)
        return Int(count.trimmingCharacters(in: .whitespacesAndNewlines)) ?? -1
    }

    /// How many popups are on the screen once dunst has drawn what it was sent: none waiting in its queue and at
    /// least one shown (the relay was told one was). What a test asserts on after a delivery, instead of a sleep.
    func drawn() async throws -> Int {
        let deadline = ContinuousClock.now + .seconds(10)
        while ContinuousClock.now < deadline {
            let waiting = try await runCommand(["dunstctl", "count", "waiting"], env: env)
            let shown = try await displayed()
            if Int(waiting.trimmingCharacters(in: .whitespacesAndNewlines)) == 0, shown >= 1 { return shown }
            try await Task.sleep(for: .milliseconds(20))
        }
        return try await displayed()
    }

    /// What dunst said (it warns there about an icon it cannot find).
    var dunstLog: String { (try? String(contentsOfFile: dir + "/dunst.log", encoding: .utf8)) ?? "" }

    func stop() { _ = try? runCommandBlocking([Self.script, "stop", dir]) }
}

/// Waits (up to 15 s) until the popups sink has settled `count` alerts: delivered, or merged into a newer balance
/// that superseded them.
func waitForDelivered(_ count: Int, in store: Store, sourceLocation: SourceLocation = #_sourceLocation) async throws {
    let deadline = ContinuousClock.now + .seconds(15)
    let settled = { () throws -> Int in
        let c = try store.deliveryCounts()["popups"] ?? [:]
        return (c["delivered"] ?? 0) + (c["merged"] ?? 0)
    }
    while try settled() < count {
        guard ContinuousClock.now < deadline else {
            let delivered = try store.deliveryCounts()["popups"]?["delivered"] ?? 0
            Issue.record("\(delivered) of \(count) popups delivered within 15 s", sourceLocation: sourceLocation)
            return
        }
        try await Task.sleep(for: .milliseconds(50))
    }
}

/// The relay (another process) has nothing left to send: no delivery of any sink pending or under way in its ledger.
/// Each event's rows are written with it, so once its transaction is stored a late alert would be one of these.
func ledgerSettled(_ store: Store) async -> Bool {
    await eventually(.seconds(10)) {
        ((try? store.deliveryCounts()) ?? [:]).values.allSatisfy { $0["pending"] == nil && $0["in_flight"] == nil }
    }
}

/// A transaction made on the simulator through its REST API (as the app would), for a known child.
func simTransaction(
    _ base: URL, child: String = "11111111-1111-4111-8111-111111111111", amount: String, type: String
) async throws {
    var request = URLRequest(url: base.appending(path: "api/v1/transactions"))
    request.httpMethod = "POST"
    request.setValue("Bearer e2e-token", forHTTPHeaderField: "Authorization")
    request.httpBody = Data(#"{"childId":"\#(child)","amount":\#(amount),"type":"\#(type)","description":"Test"}"#.utf8)
    let (_, response) = try await TestHTTP.data(for: request)
    guard (response as? HTTPURLResponse)?.statusCode == 201 else {
        throw HarnessError("POST /api/v1/transactions: \(response)")
    }
}

@Suite(.serialized, .timeLimit(.minutes(2))) struct DesktopPopupTests {
    func config(_ extra: String = "") throws -> String {
        let dir = FileManager.default.temporaryDirectory.appending(path: "relay-desktop-\(UUID())")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let file = dir.appending(path: "relay.yaml").path
        try ("sinks:\n  popups:\n    type: desktop\n" + extra).write(toFile: file, atomically: true, encoding: .utf8)
        return file
    }

    @Test func notifyTestPopsUpOnARealNotificationServer() async throws {
        let desktop = try await DesktopSession()
        defer { desktop.stop() }
        let run = try RelayProcess(
            env: desktop.env, arguments: ["notify", "test", "--config", try config(), "--sink", "popups"])
        #expect(await run.wait() == 0, "\(run.output)")
        #expect(run.output.contains("Sink popups (desktop) accepted the test alert."))
        await desktop.screenshot("desktop-notify-test")
        let shown = try await desktop.popups()
        #expect(shown.count == 1)
        #expect(shown.first?.summary == "allowance-relay test" && shown.first?.app == "allowance-relay")
        #expect(shown.first?.body.contains("the sink popups works") == true)
        // The relay's own icon, though nothing is installed: run from the checkout, it names the checkout's file.
        #expect(!desktop.dunstLog.contains("No icon found"), "\(desktop.dunstLog)")
    }

    /// A database of its own for a relay in the desktop session.
    static func newStorePath() -> String {
        FileManager.default.temporaryDirectory.appending(path: "relay-desktop-\(UUID())/relay.sqlite").path
    }

    /// `allowance-relay run` in the desktop session, on a database of its own (or `store`), connected and caught
    /// up; `env` adds to the session's environment.
    func startRelay(
        on desktop: DesktopSession, _ base: URL, config file: String, store storePath: String = newStorePath(),
        env: [String: String] = [:]
    ) async throws -> (RelayProcess, String) {
        let relay = try RelayProcess(
            env: desktop.env.merging(simRelayEnv(base, store: storePath)) { $1 }.merging(env) { $1 },
            arguments: ["run", "--config", file])
        #expect(await relay.waitFor("caught up"))
        return (relay, storePath)
    }

    @Test func theRelayPopsUpTransactionsAndReplacesEachChildsBalancePopup() async throws {
        let desktop = try await DesktopSession()
        defer { desktop.stop() }
        let file = try config(
            "rules:\n  - event: [transaction.created, balance.updated]\n    to: popups\n    digest: false\n")
        try await withSim { base in
            let (relay, storePath) = try await startRelay(on: desktop, base, config: file)
            // Id-only TransactionCreated (older servers): each BalanceUpdated then brings news, and the
            // transactions come by catch-up.
            try await simPost(base, "/_sim/payload?mode=id")
            try await simPost(base, "/_sim/burst?count=4")
            let store = try Store.open(path: storePath)
            try await waitForDelivered(8, in: store)
            await desktop.screenshot("desktop-relay")
            await relay.expectCleanStop()
            let children = Set(try store.transactions().map(\.childId)).count
            let shown = try await desktop.popups()
            // A burst makes one transaction popup per child, each listing the child's transactions.
            let transactions = shown.filter { $0.body.contains(" for \"") }
            let balances = shown.filter { $0.body.contains("balance is now") }
            #expect(transactions.count == children, "\(shown)")
            #expect(transactions.map { $0.body.split(separator: "\n").count }.reduce(0, +) == 4, "\(shown)")
            #expect(balances.count == children, "one balance popup per child, updated in place: \(balances)")
            // Each change of a balance planned an alert; the ones a newer balance superseded before they went out
            // were merged into it, the rest replaced the child's popup in place.
            let balanceAlerts = try store.deliveries(sink: "popups").filter { $0.kind == .balanceUpdated }
            #expect(balanceAlerts.count > children, "more balance changes (\(balanceAlerts.count)) than children")
            #expect(
                balanceAlerts.allSatisfy { $0.state == .delivered || $0.state == .merged },
                "\(balanceAlerts.map(\.state))")
        }
    }

    /// Full TransactionCreated (as ASP.NET backends send it): each transaction changes the balance, so
    /// `balance.updated` fires once per transaction (the confirming BalanceUpdated adds nothing), and the child's one
    /// balance popup is replaced in place, also by a relay started again.
    @Test func theBalancePopupFollowsEachChangeInPlaceAcrossARestart() async throws {
        let desktop = try await DesktopSession()
        defer { desktop.stop() }
        let file = try config("rules:\n  - event: balance.updated\n    to: popups\n")
        try await withSim { base in
            let storePath = FileManager.default.temporaryDirectory.appending(
                path: "relay-desktop-\(UUID())/relay.sqlite"
            ).path
            let env = desktop.env.merging(
                [
                    "ALLOWANCE_RELAY_SERVER_URL": base.absoluteString, "ALLOWANCE_RELAY_SERVER_TOKEN": "e2e-token",
                    "ALLOWANCE_RELAY_STORE_PATH": storePath,
                ]
            ) { $1 }
            for round in 1...2 {
                let relay = try RelayProcess(env: env, arguments: ["run", "--config", file])
                #expect(await relay.waitFor("caught up"))
                try await simTransaction(base, amount: "1.00", type: "Credit")
                try await simTransaction(base, amount: "0.50", type: "Debit")
                let store = try Store.open(path: storePath)
                try await waitForDelivered(2 * round, in: store)
                // Settled and stopped cleanly (all it read, handled): a BalanceUpdated after the last one would show.
                #expect(await ledgerSettled(store))
                await relay.expectCleanStop()
                let updates = try store.deliveries(sink: "popups").filter { $0.kind == .balanceUpdated }
                #expect(
                    updates.count == 2 * round,
                    "one per change of the balance: \(updates.map { (try? $0.event.balance) ?? 0 })")
            }
            await desktop.screenshot("desktop-balance-in-place")
            let shown = try await desktop.popups().filter { $0.body.contains("balance is now") }
            #expect(shown.count == 1, "Alice's one balance popup, replaced four times, across two runs: \(shown)")
            #expect(
                shown.first?.body.contains("$26.50") == true,
                "the latest balance (25.50 + 1.00 - 0.50 + 1.00 - 0.50): \(shown)")
        }
    }

    /// A summary's popup shows the child's chart: a file of the relay's in its own folder of the session's runtime
    /// directory, named by the `image-path` hint. A relay that missed today's summary time (its last one was
    /// yesterday's) sends it when it starts. dunst's history names the file; Pillow reads it.
    @Test func theSummaryPopupShowsTheChildsChart() async throws {
        try #require(PythonPeer.available)
        let desktop = try await DesktopSession()
        defer { desktop.stop() }
        var utc = Calendar(identifier: .gregorian)
        utc.timeZone = TimeZone(identifier: "UTC")!
        let hourAgo = utc.dateComponents([.hour, .minute], from: Date().addingTimeInterval(-3600))
        let at = String(format: "%02d:%02d", hourAgo.hour!, hourAgo.minute!)
        let file = try config(
            "rules:\n  - name: evening\n    summary: daily at \(at)\n    to: popups\nrelay:\n  time_zone: UTC\n")
        let runtime = FileManager.default.temporaryDirectory.appending(path: "runtime-\(UUID())").path
        try FileManager.default.createDirectory(
            atPath: runtime, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        try await withSim { base in
            let storePath = Self.newStorePath()
            let store = try Store.open(path: storePath)
            // A relay that ran yesterday: the family in its cache, yesterday's summary done.
            let alice = UUID(uuidString: "11111111-1111-4111-8111-111111111111")!
            try store.storeCaughtUp(
                children: [
                    Child(id: alice, firstName: "Alice", lastName: "E", weeklyAllowance: 10, currentBalance: 25.5)
                ], transactions: [])
            let due = SummarySchedule("daily at \(at)")!.lastDue(atOrBefore: Date(), in: utc.timeZone)
            try store.raiseSummaries(
                rule: "evening", due: due.addingTimeInterval(-86400), events: [], baselineOnly: true)
            let (relay, _) = try await startRelay(
                on: desktop, base, config: file, store: storePath, env: ["XDG_RUNTIME_DIR": runtime])
            let sent = {
                ((try? store.deliveries(sink: "popups")) ?? []).filter { $0.kind == .summary && $0.state == .delivered }
            }
            #expect(await eventually(.seconds(15)) { !sent().isEmpty }, "\(relay.output)")
            await desktop.screenshot("desktop-summary-chart")
            await relay.expectCleanStop()
            let all = try await desktop.popups()
            let charts = all.filter { $0.icon.hasPrefix(runtime + "/allowance-relay/chart-") }
            #expect(charts.count == sent().count, "each child's summary with its chart: \(all)")
            let icon = try #require(charts.first?.icon, "\(all)")
            let mode = try FileManager.default.attributesOfItem(atPath: icon)[.posixPermissions] as? Int
            #expect(mode == 0o600, "the chart is the family's business: \(String(mode ?? 0, radix: 8))")
            let read = try await PythonPeer.run(script: "read_chart.py", arguments: [icon], input: "")
            let chart = try #require(
                try JSONSerialization.jsonObject(with: Data(read.output.utf8)) as? [String: Any], "\(read.output)")
            #expect(chart["format"] as? String == "PNG" && chart["size"] as? [Int] == [640, 320], "\(chart)")
        }
    }

    @Test func theLowBalancePopupClosesWhenTheBalanceRecovers() async throws {
        let desktop = try await DesktopSession()
        defer { desktop.stop() }
        let file = try config(
            "rules:\n  - event: balance.low\n    below: 5.00\n    to: popups\n    urgency: critical\n")
        try await withSim { base in
            let (relay, storePath) = try await startRelay(on: desktop, base, config: file)
            let store = try Store.open(path: storePath)
            try await simTransaction(base, amount: "24.00", type: "Debit")  // 25.50 -> 1.50
            try await waitForDelivered(1, in: store)
            #expect(try await desktop.displayed() == 1, "the critical low-balance popup is up")
            await desktop.screenshot("desktop-balance-low")
            try await simTransaction(base, amount: "10.00", type: "Credit")  // 1.50 -> 11.50: no longer low
            try await waitForDelivered(2, in: store)
            #expect(
                await eventually(.seconds(10)) { (try? await desktop.displayed()) == 0 },
                "closed when the balance recovered")
            #expect(
                try store.popup(
                    sink: "popups", child: UUID(uuidString: "11111111-1111-4111-8111-111111111111")!, role: .low) == nil
            )
            #expect(
                try store.deliveries(sink: "popups").map(\.kind).sorted { $0.rawValue < $1.rawValue } == [
                    .balanceLow, .balanceRecovered,
                ])
            await relay.expectCleanStop()
        }
    }

    @Test func withoutANotificationServerTheSinkSaysSoOnceAndTheOthersCarryOn() async throws {
        let desktop = try await DesktopSession(notifier: false)
        defer { desktop.stop() }
        let hook = WebhookReceiver()
        try await hook.run { hookURL in
            let file = try config("  hook:\n    type: webhook\n    url: \(hookURL.absoluteString)/hook\n")
            try await withSim { base in
                let relay = try RelayProcess(
                    env: desktop.env.merging([
                        "ALLOWANCE_RELAY_SERVER_URL": base.absoluteString, "ALLOWANCE_RELAY_SERVER_TOKEN": "e2e-token",
                    ]) { $1 },
                    arguments: ["run", "--config", file])
                #expect(await relay.waitFor("caught up"))
                try await simPost(base, "/_sim/burst?count=3")
                #expect(await relay.waitFor("sink popups is unavailable"))
                let deadline = ContinuousClock.now + .seconds(10)
                while ContinuousClock.now < deadline, hook.received.count < 3 {
                    try await Task.sleep(for: .milliseconds(50))
                }
                #expect(hook.received.count == 3, "the webhook is not held back by the desktop")
                await relay.expectCleanStop()
                #expect(relay.output.components(separatedBy: "sink popups is unavailable").count == 2, "said once")
                #expect(relay.output.contains("no notification server"))
            }
        }
    }

    /// dunst stopped (SIGSTOP) still owns the notifications' name: the bus queues each call for it, unanswered until
    /// sd-bus gives up (10 s for a popup, 25 for the server's capabilities), as with a server that hangs. The popups
    /// sink waits alone: the other sinks send and the store keeps each event meanwhile.
    @Test func aHungNotificationServerHoldsUpNeitherTheWebhooksNorTheStore() async throws {
        let desktop = try await DesktopSession()
        defer { desktop.stop() }
        let hook = WebhookReceiver()
        try await hook.run { hookURL in
            let file = try config("  hook:\n    type: webhook\n    url: \(hookURL.absoluteString)/hook\n")
            try await withSim { base in
                let (relay, storePath) = try await startRelay(on: desktop, base, config: file)
                let store = try Store.open(path: storePath)
                let stored = try store.transactions().count
                let dunst = try #require(
                    Int32(
                        try String(contentsOfFile: desktop.dir + "/dunst.pid", encoding: .utf8)
                            .trimmingCharacters(in: .whitespacesAndNewlines)))
                kill(dunst, SIGSTOP)
                var resumed = false
                defer { if !resumed { kill(dunst, SIGCONT) } }
                let gaveUp = "sink popups is unavailable"
                // The order is the oracle: the webhooks arrive, and the events of a second burst (sent while the
                // popups wait) are stored and sent, before the popups sink gives up.
                for (burst, total) in [(3, 3), (2, 5)] {
                    try await simPost(base, "/_sim/burst?count=\(burst)")
                    #expect(
                        await eventually(.seconds(60)) { hook.received.count >= total || relay.output.contains(gaveUp) }
                    )
                    #expect(hook.received.count == total, "the webhooks waited for the desktop: \(relay.output)")
                    #expect(try store.transactions().count == stored + total, "the events waited for the desktop")
                }
                #expect(!relay.output.contains(gaveUp), "the popups sink was still waiting for its answer")
                kill(dunst, SIGCONT)
                resumed = true
                await relay.expectCleanStop()
            }
        }
    }

    /// After a popup, the thread that listens for clicks sleeps until the bus has something for it: no timer of its own
    /// (a quarter-second poll was 14,000 wake-ups an hour on a laptop).
    @Test func theBusListenerSleepsWhileNothingHappens() async throws {
        let desktop = try await DesktopSession()
        defer { desktop.stop() }
        try await withSim { base in
            let (relay, storePath) = try await startRelay(on: desktop, base, config: try config())
            try await simPost(base, "/_sim/burst?count=1")
            try await waitForDelivered(1, in: try Store.open(path: storePath))
            // A quarter-second poll shows twelve times in the window.
            let woke = try await ProcessThreads.sleeps(of: relay.pid, named: "desktop-bus", over: .seconds(3))
            let wokeTimes = try #require(woke, "the listener runs once a popup was sent")
            #expect(wokeTimes <= 2, "the desktop bus's listener woke \(wokeTimes) times in 3 s with nothing to do")
            await relay.expectCleanStop()
        }
    }

    @Test func withoutASessionBusNotifyTestSaysWhy() async throws {
        let run = try RelayProcess(
            env: ["DBUS_SESSION_BUS_ADDRESS": "unix:path=/nonexistent/bus", "XDG_RUNTIME_DIR": "/nonexistent"],
            arguments: ["notify", "test", "--config", try config(), "--sink", "popups"])
        #expect(await run.wait() == 1)
        #expect(run.output.contains("cannot connect to the session bus"), "\(run.output)")
        #expect(
            run.output.contains(
                "run the relay as that user's service, `systemctl --user`, or set DBUS_SESSION_BUS_ADDRESS"),
            "\(run.output)")
    }
}
