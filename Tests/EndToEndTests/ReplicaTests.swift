import AllowanceAPI
import Core
import Foundation
import TestSupport
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Relays as replicas on one real PostgreSQL server (`store.url`): the real binary, the simulator, a real webhook
/// receiver. Each run ends with every transaction the server made during it delivered, a repeat only under the same
/// webhook-id (at most the sink's concurrency, here 1, per kill), and no pause between deliveries longer than 5 s.
@Suite(.serialized, .timeLimit(.minutes(4))) struct ReplicaTests {
    /// A test's cluster, simulator, config and running replicas, the link holder found and its history taken.
    struct Replicas {
        let cluster: PostgresCluster
        let database: String
        let passwordFile: String
        let base: URL
        let config: String
        let names: [String]
        let relays: [RelayProcess]
        let holder: Int
        /// Each replica's `status.listen` port, for those that serve one.
        var statusPorts: [String: Int] = [:]

        /// A relay's (or a command's) environment: the shared store, its own name and local file.
        func env(name: String) -> [String: String] {
            var env = [
                "ALLOWANCE_RELAY_SERVER_URL": base.absoluteString, "ALLOWANCE_RELAY_SERVER_TOKEN": "e2e-token",
                "ALLOWANCE_RELAY_STORE_URL": cluster.url(database: database),
                "ALLOWANCE_RELAY_STORE_PASSWORD_FILE": passwordFile,
                "ALLOWANCE_RELAY_STORE_REPLICA_NAME": name,
                "ALLOWANCE_RELAY_STORE_PATH": FileManager.default.temporaryDirectory.appending(
                    path: "replica-\(name)-\(UUID())/relay.sqlite"
                ).path,
            ]
            if let port = statusPorts[name] { env["ALLOWANCE_RELAY_STATUS_LISTEN"] = "127.0.0.1:\(port)" }
            return env
        }

        /// `allowance-relay ARGUMENTS --config CONFIG` as a command of its own, not a replica.
        func command(_ arguments: [String]) throws -> RelayProcess {
            try RelayProcess(env: env(name: "cli"), arguments: arguments + ["--config", config])
        }

        func output(_ arguments: [String]) async throws -> String {
            try await RelayProcess.output(arguments + ["--config", config], env: env(name: "cli"))
        }

        func serverIds() async throws -> Set<String> {
            Set(try await ServerTruth.transactions(base).map { $0.id.uuidString.lowercased() })
        }
    }

    /// Starts a cluster, the simulator and the replicas `names` relaying every transaction to `hook` (concurrency
    /// 1); `body` runs once one of them holds the link and has taken the family's history.
    func withReplicas(
        _ names: [String], hook: WebhookReceiver, statusPorts: [String: Int] = [:], moreRules: String = "",
        _ body: (Replicas) async throws -> Void
    ) async throws {
        let cluster = try await PostgresCluster()
        let database = try await cluster.createDatabase()
        let passwordFile = cluster.dir.appending(path: "relay-password").path
        try cluster.password.write(toFile: passwordFile, atomically: true, encoding: .utf8)
        chmod(passwordFile, 0o600)
        try await hook.run { hookURL in
            try await withSim { base in
                let config = try Scenario.writeConfig(hook: hookURL, sinkOptions: "    concurrency: 1")
                // The config ends with its rules: more are appended to the list.
                if !moreRules.isEmpty {
                    let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: config))
                    try handle.seekToEnd()
                    try handle.write(contentsOf: Data(("\n" + moreRules).utf8))
                    try handle.close()
                }
                var starting = Replicas(
                    cluster: cluster, database: database, passwordFile: passwordFile, base: base, config: config,
                    names: names,
                    relays: [], holder: 0, statusPorts: statusPorts)
                let relays = try names.map {
                    try RelayProcess(env: starting.env(name: $0), arguments: ["run", "--config", config])
                }
                guard let holder = await linkHolder(relays) else {
                    Issue.record("no replica took the hub link:\n\(relays.map { $0.output.suffix(2000) })")
                    return
                }
                #expect(await relays[holder].waitFor("of the family's history stored"))
                starting = Replicas(
                    cluster: cluster, database: database, passwordFile: passwordFile, base: base, config: config,
                    names: names,
                    relays: relays, holder: holder, statusPorts: statusPorts)
                try await body(starting)
            }
        }
    }

    /// Waits until `hook` has every transaction of `made`; checks the repeats and the pauses, and says them.
    func expectDelivered(_ made: Set<String>, to hook: WebhookReceiver, repeatsAtMost: Int, _ label: String) async {
        let all = await eventually(.seconds(60)) { Set(hook.received.compactMap(Scenario.transactionId)) == made }
        let got = Set(hook.received.compactMap(Scenario.transactionId))
        #expect(all, "delivered \(got.intersection(made).count) of \(made.count)")
        let ids = hook.received.compactMap { $0.headers["webhook-id"] }
        let repeats = ids.count - Set(ids).count
        print(
            "\(label): \(made.count) transactions, \(ids.count) requests, \(repeats) repeated ids, longest gap \(longestGap(hook))"
        )
        let gap = longestGap(hook).components
        ReliabilityFigures.record(
            label,
            [
                ("events", made.count), ("alerts", made.count), ("lost_alerts", made.subtracting(got).count),
                ("repeats", repeats), ("requests", ids.count),
                ("longest_gap_ms", Int(gap.seconds * 1000 + gap.attoseconds / 1_000_000_000_000_000)),
            ])
        #expect(repeats <= repeatsAtMost, "a repeat only under the same id, at most one per kill with concurrency 1")
        #expect(longestGap(hook) < .seconds(5), "no pause over 5 s")
    }

    /// The longest pause between two webhook arrivals.
    func longestGap(_ hook: WebhookReceiver) -> Duration {
        let times = hook.arrivals.sorted()
        return zip(times, times.dropFirst()).map { $1 - $0 }.max() ?? .zero
    }

    /// Waits for the replicas to agree on one link holder; returns its index.
    func linkHolder(_ relays: [RelayProcess]) async -> Int? {
        var holder: Int?
        _ = await eventually(.seconds(15)) {
            holder = relays.firstIndex {
                $0.output.components(separatedBy: "holds the hub link").count
                    > $0.output.components(separatedBy: "no longer holds").count
            }
            return holder != nil
        }
        return holder
    }

    @Test(arguments: [2, 3]) func theLinkHolderKilledDuringAPacedRunIsTakenOverAndNothingIsLost(
        replicas: Int
    ) async throws {
        let hook = WebhookReceiver()
        try await withReplicas((0..<replicas).map { "r\($0)" }, hook: hook) { r in
            let before = try await r.serverIds()
            let paced = Task { try await simPost(r.base, "/_sim/paced?count=60&rate=10") }
            try await Task.sleep(for: .seconds(2))
            _ = await r.relays[r.holder].stop(signal: SIGKILL)
            let others = r.relays.indices.filter { $0 != r.holder }.map { r.relays[$0] }
            #expect(await linkHolder(others) != nil, "another replica takes the link")
            try await paced.value
            let made = try await r.serverIds().subtracting(before)
            #expect(made.count == 60)
            await expectDelivered(
                made, to: hook, repeatsAtMost: 1,
                "replicas (\(replicas)): the link holder killed (kill -9) in a paced run")

            // status lists the replicas and the new holder.
            let status = try r.command(["status", "--json"])
            _ = await eventually(.seconds(10)) { status.output.contains("linkHolder") }
            guard let json = try? JSONValue(parsing: Array(status.output.utf8)) else {
                Issue.record("status --json: \(status.output)")
                return
            }
            #expect(json["replicas"]?.arrayValue?.count == replicas)
            #expect(
                r.names.filter { $0 != r.names[r.holder] }.contains(json["linkHolder"]?.stringValue ?? ""),
                "\(status.output)")
            #expect(
                !status.output.contains(r.cluster.password)
                    && !r.relays.contains { $0.output.contains(r.cluster.password) })
            // The one status on either store: the sync state (caught up, once the new holder's catch-up ends) and
            // the hub as the new holder sees them.
            let idle = await eventually(.seconds(20)) {
                let now = (try? await r.output(["status", "--json"])) ?? ""
                return (try? JSONValue(parsing: Array(now.utf8)))?["sync"]?["phase"]?.stringValue == "idle"
            }
            #expect(idle, "\(status.output)")
            #expect(json["hub"]?["state"]?.stringValue == "connected", "\(status.output)")
            #expect((json["transactions"]?.intValue ?? 0) >= made.count, "\(status.output)")
            // The one command that is the file's by nature (SQLite's VACUUM) says so rather than do nothing.
            let prune = try r.command(["store", "prune"])
            #expect(await prune.wait() == 69)
            #expect(prune.output.contains("works on the SQLite store only"), "\(prune.output)")
            let listed = try await r.output(["transactions", "--json", "--limit", "100"])
            let ids =
                (try? JSONValue(parsing: Array(listed.utf8)))?.arrayValue?.compactMap { $0["id"]?.stringValue } ?? []
            #expect(made.isSubset(of: Set(ids)))
            for relay in others { await relay.expectCleanStop() }
        }
    }

    @Test func aReplicaKilledWhileHoldingClaimsHasThemSentByAnother() async throws {
        // A receiver slow enough that a replica holds each claim far longer than a look at the ledger takes.
        let hook = WebhookReceiver { _, _ in .init(200, delay: .milliseconds(400)) }
        try await withReplicas(["a", "b"], hook: hook) { r in
            let before = try await r.serverIds()
            try await simPost(r.base, "/_sim/burst?count=40")
            // A replica seen holding claims on the shared ledger dies: the one without the link when it is seen
            // claiming (on a loaded machine the link holder may claim every row, and then it is the one).
            func held(_ name: String) async -> Int {
                let sql = "SELECT count(*) FROM relay_delivery WHERE state = 'in_flight' AND claimed_by = '\(name)'"
                return Int(
                    (try? await r.cluster.psql(sql, database: r.database))?.trimmingCharacters(
                        in: .whitespacesAndNewlines) ?? "") ?? 0
            }
            var victim: Int?
            let deadline = ContinuousClock.now + .seconds(20)
            while victim == nil, ContinuousClock.now < deadline {
                for i in [1 - r.holder, r.holder] where victim == nil {
                    if await held(r.names[i]) > 0 { victim = i }
                }
                if victim == nil { try await Task.sleep(for: .milliseconds(20)) }
            }
            let killed = try #require(victim, "no replica was seen holding a claim")
            _ = await r.relays[killed].stop(signal: SIGKILL)
            // Its claims stay its own on the ledger until they expire: it died holding them.
            #expect(await held(r.names[killed]) > 0, "replica \(r.names[killed]) was killed while holding claims")
            let made = try await r.serverIds().subtracting(before)
            await expectDelivered(
                made, to: hook, repeatsAtMost: 1, "replicas: one killed (kill -9) while holding claims")
            await r.relays[1 - killed].expectCleanStop()
        }
    }

    /// The shared database goes away under both replicas in the middle of a paced burst: stopped as a service restart
    /// does, or crashed (an immediate shutdown: no checkpoint, crash recovery at the next start).
    @Test(arguments: [false, true]) func theDatabaseRestartedUnderTheReplicasLosesNothing(crash: Bool) async throws {
        let hook = WebhookReceiver()
        try await withReplicas(["a", "b"], hook: hook) { r in
            let before = try await r.serverIds()
            let paced = Task { try await simPost(r.base, "/_sim/paced?count=40&rate=10") }
            try await Task.sleep(for: .seconds(1))
            if crash { r.cluster.crash() } else { r.cluster.stop() }
            try await Task.sleep(for: .seconds(1))
            try await r.cluster.start()
            try await paced.value
            let made = try await r.serverIds().subtracting(before)
            await expectDelivered(
                made, to: hook, repeatsAtMost: 2,
                crash
                    ? "replicas: PostgreSQL crashed (immediate shutdown) in a paced run"
                    : "replicas: PostgreSQL restarted in a paced run")
            for relay in r.relays { await relay.expectCleanStop() }
        }
    }

    /// A mute set with the CLI on the shared store reaches every replica at once (the database notifies them): a
    /// burst after it delivers every other child's transactions and none of the muted child's, which the shared
    /// ledger records as muted; `summary show` reads the shared store too.
    @Test func aMuteSetOnTheSharedStoreHoldsOnEveryReplica() async throws {
        let hook = WebhookReceiver()
        try await withReplicas(["a", "b"], hook: hook) { r in
            let added = try await r.output(["mute", "add", "Alice", "--until", "23:59"])
            #expect(added.contains("Muted Alice on every sink") && added.contains("Every running replica"), "\(added)")
            for relay in r.relays {
                #expect(await relay.waitFor("mutes read again: 1 running"), "\(relay.output.suffix(1500))")
            }
            let mutes = try JSONValue(parsing: Array(try await r.output(["mute", "list", "--json"]).utf8))
            let alice = try #require(mutes.arrayValue?.first?["childId"]?.stringValue)
            let before = try await r.serverIds()
            try await simPost(r.base, "/_sim/burst?count=30")
            let made = try await ServerTruth.transactions(r.base).filter { !before.contains($0.id.lowercased) }
            let muted = Set(made.filter { $0.childId.lowercased == alice }.map { $0.id.lowercased })
            let others = Set(made.map { $0.id.lowercased }).subtracting(muted)
            #expect(!muted.isEmpty && !others.isEmpty, "the burst made transactions for Alice and the others")
            #expect(await eventually(.seconds(30)) { Set(hook.received.compactMap(Scenario.transactionId)) == others })
            #expect(Set(hook.received.compactMap(Scenario.transactionId)).isDisjoint(with: muted), "nothing of Alice's")
            let ledger = try JSONValue(
                parsing: Array(try await r.output(["deliveries", "list", "--state", "muted", "--json"]).utf8))
            #expect(ledger.arrayValue?.count == muted.count, "each of Alice's recorded as muted on the shared ledger")
            let summaries = try JSONValue(parsing: Array(try await r.output(["summary", "show", "--json"]).utf8))
            #expect(summaries.arrayValue?.count == 3, "a summary per child of the shared cache")
            #expect(try await r.output(["mute", "remove", "Alice"]).contains("Lifted 1 mute(s) of Alice"))
            for relay in r.relays { await relay.expectCleanStop() }
        }
    }

    /// The session that listens for other replicas' commits sleeps until one comes: no timer of its own (a poll every
    /// 500 ms before), and a stop still ends it at once (the clean stop).
    @Test func aRestingReplicasListenerWakesOnlyForNotifications() async throws {
        try await withReplicas(["a"], hook: WebhookReceiver()) { r in
            let relay = r.relays[0]
            // A 500 ms poll shows six times in the window.
            let woke = try await ProcessThreads.sleeps(of: relay.pid, named: "pg-listen", over: .seconds(3))
            let wokeTimes = try #require(woke, "the replica listens")
            #expect(wokeTimes <= 2, "the listening session woke \(wokeTimes) times in 3 s at rest")
            await relay.expectCleanStop()
        }
    }

    /// Two replicas at rest ask the shared database nothing: the holder watches its lease's session, the standby
    /// waits in the server's queue for the lock, the heartbeat sleeps while neither holds a claim, and the listener
    /// waits for notifications. Both are still shown up (their presence lock), and a replica killed is shown gone at
    /// once. The oracle is the server's own record of each session's last statement (`pg_stat_activity`).
    @Test func restingReplicasAskTheDatabaseNothingAndAreStillShownUp() async throws {
        try await withReplicas(["a", "b"], hook: WebhookReceiver()) { r in
            let sessions = """
                SELECT application_name || ' ' || coalesce(query_start::text, '-') || ' ' || state FROM pg_stat_activity
                WHERE application_name LIKE 'allowance-relay%' ORDER BY 1
                """
            func sample() async -> String { (try? await r.cluster.psql(sessions, database: r.database)) ?? "" }
            // Before, the heartbeat and the lease's check each asked once a second: no 3 s window was quiet. Now a
            // window may still hold the start's last statements, or a worker's look once a minute: six are tried.
            var (quiet, before) = (false, "")
            for _ in 0..<6 where !quiet {
                before = await sample()
                try await Task.sleep(for: .seconds(3))
                quiet = await sample() == before
            }
            #expect(quiet, "no 3 s window in 18 s without a statement from the replicas")
            #expect(before.components(separatedBy: "\n").filter { !$0.isEmpty }.count >= 6, "their sessions: \(before)")

            func replicas() async throws -> [String: JSONValue] {
                let json = try JSONValue(parsing: Array(try await r.output(["status", "--json"]).utf8))
                return Dictionary(
                    (json["replicas"]?.arrayValue ?? []).map { ($0["name"]?.stringValue ?? "", $0) },
                    uniquingKeysWith: { a, _ in a })
            }
            let up = try await replicas()
            #expect(up["a"]?["alive"]?.boolValue == true && up["b"]?["alive"]?.boolValue == true, "\(up)")
            let standby = 1 - r.holder
            _ = await r.relays[standby].stop(signal: SIGKILL)
            var seen: [String: JSONValue] = [:]
            #expect(
                await eventually(.seconds(5)) {
                    seen = (try? await replicas()) ?? [:]
                    return seen[r.names[standby]]?["alive"]?.boolValue == false
                }, "the killed replica shown gone: \(seen)")
            #expect(seen[r.names[r.holder]]?["alive"]?.boolValue == true)
            await r.relays[r.holder].expectCleanStop()
        }
    }

    /// `status.listen` on each replica: the link holder says the hub is connected, the other that it stands by, both
    /// healthy; their metrics read the shared store.
    @Test func eachReplicaServesHealthAndMetricsOnTheSharedStore() async throws {
        let ports = [
            "a": try freeLoopbackPortOutsideEphemeralRange(), "b": try freeLoopbackPortOutsideEphemeralRange(),
        ]
        try await withReplicas(["a", "b"], hook: WebhookReceiver(), statusPorts: ports) { r in
            func get(_ name: String, _ path: String) async throws -> (status: Int, body: String) {
                let (data, response) = try await TestHTTP.data(
                    from: URL(string: "http://127.0.0.1:\(ports[name]!)\(path)")!)
                return ((response as? HTTPURLResponse)?.statusCode ?? 0, String(decoding: data, as: UTF8.self))
            }
            let holder = r.names[r.holder]
            let standby = r.names[1 - r.holder]
            var health: [String: (status: Int, body: String)] = [:]
            _ = await eventually(.seconds(15)) {
                for name in r.names { health[name] = try? await get(name, "/healthz") }
                return health[holder]?.body.contains("\"connected\"") == true
            }
            let held = try JSONValue(parsing: Array((health[holder]?.body ?? "").utf8))
            #expect(health[holder]?.status == 200 && held["hub"]?.stringValue == "connected", "\(health)")
            #expect(held["transport"]?.stringValue == "WebSockets", "\(held)")
            let other = try JSONValue(parsing: Array((health[standby]?.body ?? "").utf8))
            #expect(health[standby]?.status == 200 && other["hub"]?.stringValue == "standby", "\(health)")
            let metrics = try await get(standby, "/metrics")
            #expect(metrics.status == 200)
            #expect(metrics.body.contains("allowance_relay_database_bytes "), "\(metrics.body.prefix(2000))")
            #expect(metrics.body.contains("allowance_relay_hub_connected 0"), "the standby holds no link")
            for relay in r.relays { await relay.expectCleanStop() }
        }
    }

    /// A summary rule on two replicas: when its time comes both schedulers wake, and the family gets one summary per
    /// child, not two (the period's row in the shared database is planned once).
    @Test func aScheduledSummaryIsSentOncePerChildByTwoReplicas() async throws {
        var utc = Calendar(identifier: .gregorian)
        utc.timeZone = TimeZone(identifier: "UTC")!
        // A minute at least 40 s away, so that both replicas are up and have seen the rule before it falls due.
        let due = utc.date(bySetting: .second, value: 0, of: Date().addingTimeInterval(100))!
        let at = String(format: "%02d:%02d", utc.component(.hour, from: due), utc.component(.minute, from: due))
        let hook = WebhookReceiver()
        let rules = "  - name: evening\n    summary: daily at \(at)\n    to: [audit]\nrelay:\n  time_zone: UTC\n"
        try await withReplicas(["a", "b"], hook: hook, moreRules: rules) { r in
            let summaries = {
                hook.received.compactMap { try? JSONValue(parsing: $0.body) }.filter {
                    $0["type"]?.stringValue == "summary"
                }
            }
            #expect(await eventually(.seconds(200)) { summaries().count >= 3 }, "the summaries came")
            // Both schedulers have taken the period: one planned it, the other found it done.
            for relay in r.relays {
                #expect(
                    await relay.waitFor("for the period ending", timeout: .seconds(30)), "\(relay.output.suffix(1500))")
            }
            let planned = r.relays.map { $0.output.contains("3 message(s) planned for the period ending") }
            #expect(planned.filter { $0 }.count == 1, "one replica planned the period")
            let children = summaries().compactMap { $0["data"]?["childId"]?.stringValue }
            #expect(children.count == 3 && Set(children).count == 3, "one per child: \(children)")
            let ledger = try JSONValue(parsing: Array(try await r.output(["deliveries", "list", "--json"]).utf8))
            let rows = ledger.arrayValue?.filter { $0["kind"]?.stringValue == "summary" } ?? []
            #expect(rows.count == 3, "planned once in the shared ledger: \(rows.count) rows")
            for relay in r.relays { await relay.expectCleanStop() }
        }
    }

    /// `transaction add` on the shared store while the backend is down: the writes wait in the shared outbox, and
    /// once it is back a replica sends them, each once and in the order they were made.
    @Test func writesQueuedOnTheSharedOutboxReachTheServerOnceAndInOrder() async throws {
        try await withReplicas(["a", "b"], hook: WebhookReceiver()) { r in
            try await simPost(r.base, "/_sim/down")
            for n in 1...3 {
                let out = try await r.output([
                    "transaction", "add", "--child", "Alice", "--amount", "1.0\(n)", "--type", "credit",
                    "--description", "shared write \(n)",
                ])
                #expect(out.contains("Queued as outbox #\(n)"), "\(out)")
            }
            #expect(try await r.output(["outbox", "list", "--json"]).contains("shared write 3"))
            try await Task.sleep(for: .seconds(1))
            try await simPost(r.base, "/_sim/up")
            let sent = await eventually(.seconds(60)) {
                let list = (try? await r.output(["outbox", "list", "--json"])) ?? ""
                return list.components(separatedBy: "\"sent\"").count - 1 == 3
            }
            #expect(sent, "every write sent")
            let server = try await ServerTruth.transactions(r.base).filter {
                $0.description.hasPrefix("shared write")
            }
            #expect(
                server.sorted { $0.createdAt < $1.createdAt }.map(\.description) == [
                    "shared write 1", "shared write 2", "shared write 3",
                ])
            for relay in r.relays { await relay.expectCleanStop() }
        }
    }
}
