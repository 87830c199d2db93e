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
        let out = try Self.shell([Self.script, "start", dir] + (notifier ? [] : ["--no-notifier"]))
        for line in out.split(separator: "\n") {
            let kv = line.split(separator: "=", maxSplits: 1).map(String.init)
            if kv.count == 2 { env[kv[0]] = kv[1] }
        }
        guard env["DBUS_SESSION_BUS_ADDRESS"] != nil else { throw HarnessError("no desktop session: \(out)") }
    }

    /// Keeps a screenshot for people to look at (.build/test-artifacts/NAME.png).
    func screenshot(_ name: String) {
        _ = try? Self.shell([Self.script, "shot", dir])
        let artifacts = PythonPeer.root.appending(path: ".build/test-artifacts")
        try? FileManager.default.createDirectory(at: artifacts, withIntermediateDirectories: true)
        try? FileManager.default.removeItem(at: artifacts.appending(path: "\(name).png"))
        try? FileManager.default.copyItem(atPath: dir + "/desktop.png", toPath: artifacts.appending(path: "\(name).png").path)
    }

    /// The popups dunst showed: closes them all, then reads its history (summary, body, app name).
    func popups() throws -> [(summary: String, body: String, app: String)] {
        _ = try Self.shell(["dunstctl", "close-all"], env: env)
        Thread.sleep(forTimeInterval: 0.2)
        let json = try JSONValue(parsing: Array(try Self.shell(["dunstctl", "history"], env: env).utf8))
        return (json["data"]?.arrayValue?.first?.arrayValue ?? []).map { n in
            (n["summary"]?["data"]?.stringValue ?? "", n["body"]?["data"]?.stringValue ?? "", n["appname"]?["data"]?.stringValue ?? "")
        }
    }

    func stop() { _ = try? Self.shell([Self.script, "stop", dir]) }

    /// Runs a command to its end; its output goes through a file. (Not Foundation's Process: a script that leaves
    /// daemons behind made its waitUntilExit hang here, with the script already a zombie.)
    static func shell(_ args: [String], env: [String: String] = [:]) throws -> String {
        let outPath = FileManager.default.temporaryDirectory.appending(path: "shell-\(UUID()).out").path
        defer { unlink(outPath) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, outPath, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        let environment = ProcessInfo.processInfo.environment.merging(env) { $1 }.map { "\($0.key)=\($0.value)" }
        let argv = (["/usr/bin/env"] + args).map { strdup($0) } + [nil]
        let envp = environment.map { strdup($0) } + [nil]
        defer { (argv + envp).forEach { free($0) } }
        var pid = pid_t()
        guard posix_spawn(&pid, "/usr/bin/env", &actions, nil, argv, envp) == 0 else { throw HarnessError("cannot run \(args[0])") }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) == -1 && errno == EINTR {}
        return (try? String(contentsOfFile: outPath, encoding: .utf8)) ?? ""
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
