import AllowanceAPI
import Foundation
import SignalRProtocol
import Store
import TestSupport
import Testing

/// A private headless desktop (Xvfb, a session bus, dunst) from Tests/Desktop/desktop-session.sh.
final class DesktopSession {
    let dir = FileManager.default.temporaryDirectory.appending(path: "desktop-\(UUID())").path
    private(set) var env: [String: String] = [:]
    static let script = PythonPeer.root.appending(path: "Tests/Desktop/desktop-session.sh").path

    init(notifier: Bool = true) throws {
        let out = try runCommand([Self.script, "start", dir] + (notifier ? [] : ["--no-notifier"]))
        for line in out.split(separator: "\n") {
            let kv = line.split(separator: "=", maxSplits: 1).map(String.init)
            if kv.count == 2 { env[kv[0]] = kv[1] }
        }
        guard env["DBUS_SESSION_BUS_ADDRESS"] != nil else { throw HarnessError("no desktop session: \(out)") }
    }

    /// Keeps a screenshot for people to look at (.build/test-artifacts/NAME.png).
    func screenshot(_ name: String) {
        _ = try? runCommand([Self.script, "shot", dir])
        let artifacts = PythonPeer.root.appending(path: ".build/test-artifacts")
        try? FileManager.default.createDirectory(at: artifacts, withIntermediateDirectories: true)
        try? FileManager.default.removeItem(at: artifacts.appending(path: "\(name).png"))
        try? FileManager.default.copyItem(atPath: dir + "/desktop.png", toPath: artifacts.appending(path: "\(name).png").path)
    }

    /// The popups dunst showed: closes them all, then reads its history (summary, body, app name).
    func popups() throws -> [(summary: String, body: String, app: String)] {
        _ = try runCommand(["dunstctl", "close-all"], env: env)
        Thread.sleep(forTimeInterval: 0.2)
        let json = try JSONValue(parsing: Array(try runCommand(["dunstctl", "history"], env: env).utf8))
        return (json["data"]?.arrayValue?.first?.arrayValue ?? []).map { n in
            (n["summary"]?["data"]?.stringValue ?? "", n["body"]?["data"]?.stringValue ?? "", n["appname"]?["data"]?.stringValue ?? "")
        }
    }

    func stop() { _ = try? runCommand([Self.script, "stop", dir]) }
}

@Suite(.serialized, .timeLimit(.minutes(2))) struct DesktopPopupTests {
    func config(_ extra: String = "") throws -> String {
        let dir = FileManager.default.temporaryDirectory.appending(path: "relay-desktop-\(UUID())")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let file = dir.appending(path: "relay.yaml").path
        try ("sinks:\n  popups:\n    type: desktop\n" + extra).write(toFile: file, atomically: true, encoding: .utf8)
        return file
    }

    @Test func notifyTestPopsUpOnARealNotificationServer() throws {
        let desktop = try DesktopSession()
        defer { desktop.stop() }
        let run = try RelayProcess(env: desktop.env, arguments: ["notify", "test", "--config", try config(), "--sink", "popups"])
        #expect(run.wait() == 0, "\(run.output)")
        #expect(run.output.contains("Sink popups (desktop) accepted the test alert."))
        desktop.screenshot("desktop-notify-test")
        let shown = try desktop.popups()
        #expect(shown.count == 1)
        #expect(shown.first?.summary == "allowance-relay test" && shown.first?.app == "allowance-relay")
        #expect(shown.first?.body.contains("the sink popups works") == true)
    }

    @Test func theRelayPopsUpTransactionsAndReplacesEachChildsBalancePopup() async throws {
        let desktop = try DesktopSession()
        defer { desktop.stop() }
        let file = try config("rules:\n  - event: [transaction.created, balance.updated]\n    to: popups\n    digest: false\n")
        try await withSim { base in
            let storePath = FileManager.default.temporaryDirectory.appending(path: "relay-desktop-\(UUID())/relay.sqlite").path
            let relay = try RelayProcess(
                env: desktop.env.merging(
                    ["ALLOWANCE_RELAY_SERVER_URL": base.absoluteString, "ALLOWANCE_RELAY_SERVER_TOKEN": "e2e-token",
                     "ALLOWANCE_RELAY_STORE_PATH": storePath]) { $1 },
                arguments: ["run", "--config", file])
            #expect(await relay.waitFor("caught up"))
            // Id-only TransactionCreated (older servers): each BalanceUpdated then brings news, and the
            // transactions come by catch-up.
            try await simPost(base, "/_sim/payload?mode=id")
            try await simPost(base, "/_sim/burst?count=4")
            let store = try Store.open(path: storePath)
            let deadline = ContinuousClock.now + .seconds(15)
            while ContinuousClock.now < deadline, (try store.deliveryCounts()["popups"]?["delivered"] ?? 0) < 8 {
                try await Task.sleep(for: .milliseconds(50))
            }
            desktop.screenshot("desktop-relay")
            #expect(relay.stop(signal: SIGTERM) == 0)
            let children = Set(try store.transactions().map(\.childId)).count
            let shown = try desktop.popups()
            let transactions = shown.filter { $0.body.contains(" for \"") }
            let balances = shown.filter { $0.body.contains("balance is now") }
            #expect(transactions.count == 4, "\(shown)")
            #expect(balances.count == children, "one balance popup per child, updated in place: \(balances)")
            let balanceAlerts = try store.deliveries(sink: "popups").filter { $0.kind == .balanceUpdated && $0.state == "delivered" }.count
            #expect(balanceAlerts > children, "more balance alerts (\(balanceAlerts)) than children: some popups were replaced")
        }
    }

    @Test func withoutANotificationServerTheSinkSaysSoOnceAndTheOthersCarryOn() async throws {
        let desktop = try DesktopSession(notifier: false)
        defer { desktop.stop() }
        let hook = WebhookReceiver()
        try await hook.run { hookURL in
            let file = try config("  hook:\n    type: webhook\n    url: \(hookURL.absoluteString)/hook\n")
            try await withSim { base in
                let relay = try RelayProcess(
                    env: desktop.env.merging(["ALLOWANCE_RELAY_SERVER_URL": base.absoluteString, "ALLOWANCE_RELAY_SERVER_TOKEN": "e2e-token"]) { $1 },
                    arguments: ["run", "--config", file])
                #expect(await relay.waitFor("caught up"))
                try await simPost(base, "/_sim/burst?count=3")
                #expect(await relay.waitFor("sink popups is unavailable"))
                let deadline = ContinuousClock.now + .seconds(10)
                while ContinuousClock.now < deadline, hook.received.count < 3 { try await Task.sleep(for: .milliseconds(50)) }
                #expect(hook.received.count == 3, "the webhook is not held back by the desktop")
                #expect(relay.stop(signal: SIGTERM) == 0)
                #expect(relay.output.components(separatedBy: "sink popups is unavailable").count == 2, "said once")
                #expect(relay.output.contains("no notification server"))
            }
        }
    }

    @Test func withoutASessionBusNotifyTestSaysWhy() throws {
        let run = try RelayProcess(
            env: ["DBUS_SESSION_BUS_ADDRESS": "unix:path=/nonexistent/bus", "XDG_RUNTIME_DIR": "/nonexistent"],
            arguments: ["notify", "test", "--config", try config(), "--sink", "popups"])
        #expect(run.wait() == 1)
        #expect(run.output.contains("cannot connect to the session bus"), "\(run.output)")
    }
}
