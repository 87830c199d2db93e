import AllowanceAPI
import Foundation
import SignalRProtocol
import Store
import TestSupport
import Testing

/// A fault scenario of RELIABILITY.md: the relay binary between the simulator (or a proxy before it) and a webhook
/// receiver, and the check every scenario ends with: every server transaction is in the cache with the server's
/// balances; every alert owed since the start was acknowledged at least once; repeats counted (a receiver
/// that dedups on `webhook-id` sees them as one); no transaction alerted under two ids (no dedup helps there).
struct Scenario {
    let base: URL
    let env: [String: String]
    let config: String
    /// Server transactions from before the scenario: no alert is owed for them (they predate the relay).
    let before: Set<String>
    var storePath: String { env["ALLOWANCE_RELAY_STORE_PATH"]! }

    /// `server`: the URL the relay is given (a proxy), by default the simulator. `sinkOptions`: extra YAML for
    /// the webhook sink (indented 4). `login`: sign in with the simulator's email and password instead of a
    /// static token. `storeDirectory`: where the database lives (a small tmpfs, say).
    init(
        base: URL, server: URL? = nil, hook: URL, sinkOptions: String = "", login: Bool = false,
        storeDirectory: URL? = nil
    ) async throws {
        self.base = base
        config = try Self.writeConfig(hook: hook, sinkOptions: sinkOptions)
        let dir = URL(fileURLWithPath: config).deletingLastPathComponent()
        var env = [
            "ALLOWANCE_RELAY_SERVER_URL": (server ?? base).absoluteString,
            "ALLOWANCE_RELAY_STORE_PATH": (storeDirectory ?? dir).appending(path: "relay.sqlite").path,
        ]
        if login {
            let passwordFile = dir.appending(path: "password").path
            try "allowance\n".write(toFile: passwordFile, atomically: true, encoding: .utf8)
            chmod(passwordFile, 0o600)
            env["ALLOWANCE_RELAY_SERVER_EMAIL"] = "parent@example.com"
            env["ALLOWANCE_RELAY_SERVER_PASSWORD_FILE"] = passwordFile
        } else {
            env["ALLOWANCE_RELAY_SERVER_TOKEN"] = "e2e-token"
        }
        self.env = env
        before = Set(try await ServerTruth.transactions(base).map { $0.id.uuidString.lowercased() })
    }

    func start() throws -> RelayProcess { try RelayProcess(env: env, arguments: ["run", "--config", config]) }

    /// A started relay, expected to have connected and finished its first catch-up.
    func startCaughtUp() async throws -> RelayProcess {
        let relay = try start()
        #expect(await relay.waitFor("caught up"), "the relay caught up after its start")
        return relay
    }

    struct Outcome {
        var events = 0, alertsOwed = 0, lostEvents = 0, lostAlerts = 0, extraEvents = 0, wrongBalances = 0
        var requests = 0, repeats = 0
        /// Transactions whose alert was acknowledged under more than one `webhook-id`: one event planned twice.
        var doubled = 0
        var nothingLost: Bool { lostEvents == 0 && lostAlerts == 0 && extraEvents == 0 && wrongBalances == 0 }
    }

    /// Compares the server, the cache and the receiver now.
    func outcome(_ hook: WebhookReceiver) async throws -> Outcome {
        var o = Outcome()
        let server = try await ServerTruth.transactions(base)
        let serverIds = Set(server.map { $0.id.uuidString.lowercased() })
        let store = try Store.open(path: storePath)
        let cached = try store.transactions(limit: 1_000_000).map { $0.id.uuidString.lowercased() }
        o.events = serverIds.count
        o.lostEvents = serverIds.subtracting(cached).count
        o.extraEvents = cached.count - Set(cached).count + Set(cached).subtracting(serverIds).count
        let balances = Dictionary(uniqueKeysWithValues: try store.children().map { ($0.id, $0.currentBalance) })
        for c in try await ServerTruth.children(base) where balances[c.id] != c.currentBalance {
            o.wrongBalances += 1
        }
        let acked = hook.acknowledged
        let ackedIds = Set(acked.compactMap(Self.transactionId))
        let owed = serverIds.subtracting(before)
        o.alertsOwed = owed.count
        o.lostAlerts = owed.subtracting(ackedIds).count
        o.requests = hook.received.count
        o.repeats = acked.count - Set(acked.compactMap { $0.headers["webhook-id"] }).count
        let idsByTransaction = Dictionary(grouping: acked, by: { Self.transactionId(of: $0) ?? "" })
            .mapValues { Set($0.compactMap { $0.headers["webhook-id"] }) }
        o.doubled = idsByTransaction.filter { !$0.key.isEmpty && $0.value.count > 1 }.count
        return o
    }

    /// Waits until nothing is missing (or the time is up), then checks and records the figures.
    @discardableResult
    func expectNothingLost(
        _ hook: WebhookReceiver, _ scenario: String, extra: [(String, Int)] = [], timeout: Duration = .seconds(60),
        repeatsAllowed: Int = 0, relay: RelayProcess? = nil
    ) async throws -> Outcome {
        var o = Outcome()
        let deadline = ContinuousClock.now + timeout
        repeat {
            o = try await outcome(hook)
            if o.nothingLost { break }
            try await Task.sleep(for: .milliseconds(250))
        } while ContinuousClock.now < deadline
        #expect(o.nothingLost, "\(scenario): \(o)\n\(relay?.output.suffix(3000) ?? "")")
        #expect(
            o.repeats <= repeatsAllowed,
            "\(scenario): \(o.repeats) alerts acknowledged twice (allowed \(repeatsAllowed))")
        #expect(o.doubled == 0, "\(scenario): \(o.doubled) transactions alerted under two webhook ids")
        let figures: [(String, Int)] = [
            ("events", o.events), ("alerts", o.alertsOwed), ("lost_events", o.lostEvents),
            ("lost_alerts", o.lostAlerts),
            ("wrong_balances", o.wrongBalances), ("requests", o.requests), ("repeats", o.repeats),
        ]
        ReliabilityFigures.record(scenario, figures + extra)
        return o
    }

    /// The transaction a signed webhook's alert is about (`data.transaction.id`), if any.
    static func transactionId(of request: WebhookReceiver.Received) -> String? {
        let alert = try? JSONSerialization.jsonObject(with: Data(request.body)) as? [String: Any]
        return ((alert?["data"] as? [String: Any])?["transaction"] as? [String: Any])?["id"] as? String
    }

}

extension Scenario {
    /// A config file with one signed webhook sink, `audit`, at `hook` (`sinkOptions`: more of its YAML, indented 4),
    /// and one rule: every transaction, one alert each. Returns its path.
    static func writeConfig(hook: URL, sinkOptions: String = "") throws -> String {
        let dir = FileManager.default.temporaryDirectory.appending(path: "relay-scenario-\(UUID())")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let yaml = """
            sinks:
              audit:
                type: webhook
                url: \(hook.absoluteString)/allowance
                secret: whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw
            \(sinkOptions)
            rules:
              - name: every transaction, one alert each
                event: transaction.created
                to: [audit]
                digest: false
            """
        let config = dir.appending(path: "relay.yaml").path
        try yaml.write(toFile: config, atomically: true, encoding: .utf8)
        return config
    }
}
