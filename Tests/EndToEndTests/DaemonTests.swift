import AllowanceAPI
import Foundation
import SignalRProtocol
import Store
import Synchronization
import TestSupport
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The daemon as people run it: the real binary with the simulator and real HTTP receivers; SIGHUP, SIGTERM,
/// /healthz, /metrics and `status` checked from outside, as an operator or systemd would.
@Suite(.serialized, .timeLimit(.minutes(3))) struct DaemonTests {
    struct Setup {
        let dir: URL
        let config: String
        let store: String
        let port: Int
        /// Where the sinks `a` and `b` send.
        let a: URL
        let b: URL

        init(a: URL, b: URL) throws {
            self.a = a
            self.b = b
            dir = FileManager.default.temporaryDirectory.appending(path: "relay-daemon-\(UUID())")
            try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
            config = dir.appending(path: "relay.yaml").path
            store = dir.appending(path: "relay.sqlite").path
            port = try freeLoopbackPortOutsideEphemeralRange()
        }

        /// Writes the config: two webhook sinks, transactions routed to `to`.
        func write(to sink: String, extra: String = "", unhealthyAfter: String = "15m") throws {
            let yaml = """
                status:
                  listen: 127.0.0.1:\(port)
                  unhealthy_after: \(unhealthyAfter)
                sinks:
                  a:
                    type: webhook
                    url: \(a.absoluteString)/a
                    concurrency: 1
                  b:
                    type: webhook
                    url: \(b.absoluteString)/b
                rules:
                  - event: transaction.created
                    to: \(sink)
                    digest: false
                \(extra)
                """
            try yaml.write(toFile: config, atomically: true, encoding: .utf8)
        }

        func start(_ base: URL) throws -> RelayProcess {
            try RelayProcess(
                env: [
                    "ALLOWANCE_RELAY_SERVER_URL": base.absoluteString, "ALLOWANCE_RELAY_SERVER_TOKEN": "e2e-token",
                    "ALLOWANCE_RELAY_STORE_PATH": store,
                ],
                arguments: ["run", "--config", config])
        }

        func get(_ path: String) async throws -> (status: Int, body: String) {
            let (data, response) = try await TestHTTP.data(from: URL(string: "http://127.0.0.1:\(port)\(path)")!)
            return ((response as? HTTPURLResponse)?.statusCode ?? 0, String(decoding: data, as: UTF8.self))
        }

        func health() async throws -> (status: Int, json: JSONValue) {
            let (status, body) = try await get("/healthz")
            return (status, try JSONValue(parsing: Array(body.utf8)))
        }
    }

    /// Two receivers and the simulator running, a config routing transactions to `a` written.
    func withRelay(
        a: WebhookReceiver = WebhookReceiver(), b: WebhookReceiver = WebhookReceiver(),
        _ body: (Setup, URL, WebhookReceiver, WebhookReceiver) async throws -> Void
    ) async throws {
        try await a.run { aURL in
            try await b.run { bURL in
                try await withSim { base in
                    let setup = try Setup(a: aURL, b: bURL)
                    try setup.write(to: "a")
                    try await body(setup, base, a, b)
                }
            }
        }
    }

    @Test func sighupChangesRoutingWithoutAReconnectAndRefusesABrokenFile() async throws {
        try await withRelay { setup, base, a, b in
            let relay = try setup.start(base)
            #expect(await relay.waitFor("caught up"))
            let before = try await setup.health().json["connectionId"]?.stringValue
            #expect(before != nil)
            try await simPost(base, "/_sim/burst?count=3")
            #expect(await eventually { a.received.count == 3 })

            try setup.write(to: "b")
            kill(relay.pid, SIGHUP)
            #expect(await relay.waitFor("reloaded the configuration"))
            try await simPost(base, "/_sim/burst?count=3")
            #expect(await eventually { b.received.count == 3 })
            #expect(await ledgerSettled(try Store.open(path: setup.store)))
            #expect(a.received.count == 3, "after the reload nothing more goes to a")

            // A broken file: refused with file, line and fix; the running config (to b) stays.
            try setup.write(to: "b", extra: "bogus: 1")
            kill(relay.pid, SIGHUP)
            #expect(
                await relay.waitFor("reload refused, still running with the previous configuration: \(setup.config):"))
            #expect(relay.output.contains("bogus: is not a known section. Fix:"))
            try await simPost(base, "/_sim/burst?count=2")
            #expect(await eventually { b.received.count == 5 })

            // One hub connection all along.
            #expect(try await setup.health().json["connectionId"]?.stringValue == before)
            #expect(relay.output.components(separatedBy: "connected to the hub").count - 1 == 1)
            await relay.expectCleanStop()
        }
    }

    @Test func sigtermLetsTheSendInFlightFinishAndLeavesTheRestPending() async throws {
        // A receiver that takes 1.5 s per request: SIGTERM lands in the middle of a send. Sink a sends one at a
        // time (`concurrency: 1` in the setup), so that the rest are still waiting when the stop comes.
        try await withRelay(a: WebhookReceiver { _, _ in .init(200, delay: .milliseconds(1500)) }) {
            setup, base, a, b in
            let relay = try setup.start(base)
            #expect(await relay.waitFor("caught up"))
            try await simPost(base, "/_sim/burst?count=4")
            #expect(await eventually { a.arrivals.count >= 1 })  // the first request has arrived, not answered
            let stopped = ContinuousClock.now
            await relay.expectCleanStop()
            #expect(ContinuousClock.now - stopped < .seconds(8))
            #expect(relay.output.contains("received SIGTERM, stopping gracefully"))

            let store = try Store.open(path: setup.store)
            let counts = try store.deliveryCounts()["a"] ?? [:]
            #expect(counts["in_flight", default: 0] == 0, "nothing left in flight: \(counts)")
            #expect(
                counts["delivered", default: 0] == a.received.count,
                "the send in flight finished and was recorded: \(relay.output.suffix(3000))")
            #expect(counts["delivered", default: 0] + counts["pending", default: 0] == 4)

            // The next start sends the rest; each delivery reaches the receiver once.
            a.respond { _, _ in .init(200) }
            let again = try setup.start(base)
            #expect(await again.waitFor("connected to the hub"))  // up before it is stopped
            #expect(await eventually { a.received.count >= 4 })
            #expect(await ledgerSettled(try Store.open(path: setup.store)))
            await again.expectCleanStop()
            #expect(a.received.count == 4 && Set(a.received.compactMap { $0.headers["webhook-id"] }).count == 4)
        }
    }

    @Test func aSendLongerThanTheGracePeriodIsCutAndPendingAgain() async throws {
        try await withRelay(a: WebhookReceiver { _, _ in .init(200, delay: .seconds(40)) }) { setup, base, a, b in
            let relay = try setup.start(base)
            #expect(await relay.waitFor("caught up"))
            try await simPost(base, "/_sim/burst?count=1")
            #expect(await eventually { a.arrivals.count >= 1 })
            let stopped = ContinuousClock.now
            await relay.expectCleanStop()
            let took = ContinuousClock.now - stopped
            #expect(took >= .seconds(9) && took < .seconds(20), "the 10 s grace period, then the cut: \(took)")
            #expect(relay.output.contains("cut short by the stop: pending again"))
            let counts = try Store.open(path: setup.store).deliveryCounts()["a"] ?? [:]
            #expect(counts["pending", default: 0] == 1 && counts["in_flight", default: 0] == 0, "\(counts)")
        }
    }

    /// Behind a proxy that strips WebSocket upgrades, against a server that wants MessagePack: the relay goes on over
    /// Long Polling (Server-Sent Events cannot carry MessagePack), stores and relays every event exactly, and
    /// `status` says how it is connected.
    @Test func messagePackOverLongPollingWhenTheUpgradeIsStripped() async throws {
        try await withRelay { setup, base, a, b in
            try await simPost(base, "/_sim/upgrades?refuse=true")
            try await simPost(base, "/_sim/transports?require=messagepack")
            try setup.write(to: "a", extra: "server:\n  hub_protocol: messagepack")
            let relay = try setup.start(base)
            #expect(await relay.waitFor("caught up"))
            try await simPost(base, "/_sim/burst?count=5")
            #expect(await eventually { a.received.count == 5 })
            let store = try Store.open(path: setup.store)
            let stored = try store.transactions(limit: 100)
            #expect(stored.count >= 5)
            // The amounts are exact after MessagePack's decimal text, and the dates to the millisecond.
            let served = Dictionary(
                uniqueKeysWithValues: try await ServerTruth.transactions(base).map {
                    ($0.id.uuidString.lowercased(), $0)
                })
            for t in stored {
                #expect(served[t.id.lowercased]?.amount == t.amount, "\(t.id)")
                let ms = { (d: Date) in (d.timeIntervalSince1970 * 1000).rounded() }
                #expect((served[t.id.lowercased]?.createdAt).map(ms) == ms(t.createdAt), "\(t.id)")
            }
            let status = try JSONValue(
                parsing: Array(
                    try await RelayProcess.output(
                        ["status", "--json"], env: ["ALLOWANCE_RELAY_STORE_PATH": setup.store]
                    ).utf8))
            #expect(status["hub"]?["transport"]?.stringValue == "LongPolling", "\(status.serialized)")
            #expect(status["hub"]?["protocol"]?.stringValue == "messagepack")
            let text = try await RelayProcess.output(["status"], env: ["ALLOWANCE_RELAY_STORE_PATH": setup.store])
            #expect(text.contains("over LongPolling (messagepack)"), "\(text)")
            await relay.expectCleanStop()
        }
    }

    @Test func healthzMetricsAndStatusTellTheTruth() async throws {
        try await withRelay { setup, base, a, b in
            let relay = try setup.start(base)
            #expect(await relay.waitFor("caught up"))
            let up = try await setup.health()
            #expect(up.status == 200 && up.json["status"]?.stringValue == "ok", "\(up.json.serialized)")
            let id = try #require(up.json["connectionId"]?.stringValue)

            try await simPost(base, "/_sim/burst?count=5")
            #expect(await eventually { a.received.count == 5 })
            // The counters move once each outcome is written: read them after the ledger settled.
            #expect(await ledgerSettled(try Store.open(path: setup.store)))
            let (status, text) = try await setup.get("/metrics")
            #expect(status == 200)
            try #require(PythonPeer.available)
            let parsed = try await PythonPeer.run(script: "parse_prometheus.py", input: text)
            #expect(parsed.status == 0, "the reference parser refused /metrics: \(parsed.output)")
            let samples = Set(parsed.output.split(separator: "\n").map(String.init))
            #expect(samples.contains("allowance_relay_hub_events_total{type=TransactionCreated} 5"), "\(samples)")
            #expect(samples.contains("allowance_relay_deliveries_total{outcome=delivered,sink=a} 5"))
            #expect(samples.contains("allowance_relay_delivery_latency_seconds_count{sink=a} 5"))
            #expect(samples.contains("allowance_relay_hub_connected{} 1.0"))
            #expect(samples.contains("allowance_relay_outbox_depth{} 0.0"))
            #expect(samples.contains("allowance_relay_deliveries{sink=a,state=pending} 0.0"))
            #expect(samples.contains { $0.hasPrefix("allowance_relay_last_event_age_seconds{} ") })

            let running = try await RelayProcess.output(
                ["status", "--json"], env: ["ALLOWANCE_RELAY_STORE_PATH": setup.store])
            let json = try JSONValue(parsing: Array(running.utf8))
            #expect(json["running"]?.boolValue == true && json["hub"]?["connectionId"]?.stringValue == id, "\(running)")
            #expect(json["hub"]?["state"]?.stringValue == "connected" && json["lastEvent"]?.stringValue != nil)
            #expect(json["settled"]?.boolValue == true, "all five delivered, nothing waiting: \(running)")

            // The hub goes away: /healthz says so, with the reason.
            try await simPost(base, "/_sim/refuse?seconds=30")
            #expect(await eventually { (try? await setup.health().status) == 503 })
            let down = try await setup.health()
            #expect(
                down.json["reasons"]?.arrayValue?.first?.stringValue?.hasPrefix("hub reconnecting since") == true,
                "\(down.json.serialized)")
            let text2 = try await setup.get("/metrics").body
            #expect(text2.contains("allowance_relay_hub_connected 0.0"))

            await relay.expectCleanStop()
            let after = try await RelayProcess.output(["status"], env: ["ALLOWANCE_RELAY_STORE_PATH": setup.store])
            #expect(after.contains("not running (last: stopped"), "\(after)")
        }
    }

    /// A sink that refuses (400) makes dead letters: /healthz says so at once, `status` names the sink with its error
    /// and `deliveries list` says why its rows wait. Fixed, `deliveries retry` reaches the running relay, which sends
    /// them now (not at its next look, a minute on). A sink that fails with retries is unhealthy once it has failed
    /// for `status.unhealthy_after`, and healthy again after the first send that goes through.
    @Test func aFailingSinkIsShownEverywhereAndARetryIsSentAtOnce() async throws {
        let answer = Mutex(400)
        let a = WebhookReceiver { _, _ in .init(answer.withLock { $0 }, body: "no thanks") }
        try await withRelay(a: a) { setup, base, a, b in
            try setup.write(to: "a", unhealthyAfter: "2s")
            let relay = try setup.start(base)
            #expect(await relay.waitFor("caught up"))
            try await simPost(base, "/_sim/burst?count=2")
            #expect(await eventually { a.received.count == 2 })
            #expect(await eventually { (try? await setup.health().status) == 503 })
            let reasons = try await setup.health().json["reasons"]?.arrayValue?.compactMap(\.stringValue) ?? []
            #expect(reasons.contains { $0.hasPrefix("sink a dead-letters since") && $0.contains("400") }, "\(reasons)")
            let env = ["ALLOWANCE_RELAY_STORE_PATH": setup.store]
            let status = try await RelayProcess.output(["status"], env: env)
            #expect(status.contains("FAILING since") && status.contains("400"), "\(status)")
            let json = try JSONValue(
                parsing: Array(try await RelayProcess.output(["status", "--json"], env: env).utf8))
            #expect(json["deliveries"]?["a"]?["failing"]?["deadLettering"]?.boolValue == true, "\(json.serialized)")

            answer.withLock { $0 = 200 }
            let retried = try await RelayProcess.output(["deliveries", "retry", "--sink", "a"], env: env)
            #expect(
                retried.contains("2 delivery(ies) queued again; the running relay (pid \(relay.pid)) sends them now"),
                "\(retried)")
            #expect(
                await eventually(.seconds(10)) { a.received.count == 4 }, "sent at once, not at the next minute's look")
            #expect(await relay.waitFor("sink a works again"))
            #expect(await eventually(.seconds(5)) { (try? await setup.health().status) == 200 })

            // Failing with retries (500): unhealthy once it has failed for 2 s, with a waiting row that says why.
            answer.withLock { $0 = 500 }
            try await simPost(base, "/_sim/burst?count=1")
            #expect(await eventually { (try? await setup.health().status) == 503 })
            let failing = try await setup.health().json["reasons"]?.arrayValue?.compactMap(\.stringValue) ?? []
            #expect(failing.contains { $0.hasPrefix("sink a failing since") && $0.contains("500") }, "\(failing)")
            let list = try JSONValue(
                parsing: Array(
                    try await RelayProcess.output(["deliveries", "list", "--sink", "a", "--json"], env: env).utf8))
            let waiting = list.arrayValue?.first { $0["state"]?.stringValue == "pending" }
            #expect(waiting?["waitsFor"]?.stringValue?.hasPrefix("sink failing since") == true, "\(list.serialized)")
            let metrics = try await setup.get("/metrics").body
            #expect(metrics.contains("allowance_relay_sink_failing{sink=\"a\"} 1"), "\(metrics)")
            answer.withLock { $0 = 200 }
            #expect(await eventually { a.received.count >= 6 })
            #expect(await eventually { (try? await setup.health().status) == 200 })
            await relay.expectCleanStop()
        }
    }

    /// The commands that read leave the database as it was, byte for byte (they opened it read-write: a status
    /// checkpointed the log into the file); `store` alone prints its help and prunes nothing.
    @Test func readCommandsLeaveTheDatabaseByteForByte() async throws {
        try await withRelay { setup, base, a, b in
            let relay = try setup.start(base)
            #expect(await relay.waitFor("caught up"))
            try await simPost(base, "/_sim/burst?count=3")
            #expect(await eventually { a.received.count == 3 })
            await relay.expectCleanStop()
            // The file and its log; the -shm index is SQLite's shared memory, where every reader marks what it reads.
            let files = ["", "-wal"].map { setup.store + $0 }
            let before = files.map { FileManager.default.contents(atPath: $0) }
            let env = ["ALLOWANCE_RELAY_STORE_PATH": setup.store]
            for command in [
                ["status"], ["status", "--json"], ["transactions"], ["balances"], ["deliveries", "list"],
                ["outbox", "list"],
                ["summary", "show"], ["mute", "list"],
            ] {
                let out = try await RelayProcess.output(command + ["--config", setup.config], env: env)
                #expect(!out.isEmpty, "\(command)")
                #expect(
                    files.map { FileManager.default.contents(atPath: $0) } == before, "\(command) changed the database")
            }
            let help = try await RelayProcess.output(["store"], env: env)
            #expect(help.contains("SUBCOMMANDS") && help.contains("prune"), "\(help)")
            #expect(files.map { FileManager.default.contents(atPath: $0) } == before, "`store` alone pruned")
        }
    }

    /// `notify test` without --sink tries every sink and says how each did; exit 1 when one refused.
    @Test func notifyTestWithoutASinkTriesEverySink() async throws {
        try await withRelay(b: WebhookReceiver { _, _ in .init(404, body: "no such hook") }) { setup, base, a, b in
            let test = try RelayProcess(env: [:], arguments: ["notify", "test", "--config", setup.config])
            #expect(await test.wait() == 1)
            #expect(test.output.contains("Sink a (webhook) accepted the test alert."), "\(test.output)")
            #expect(
                test.output.contains("Sink b (webhook) did not take the test alert:") && test.output.contains("404"))
            #expect(a.received.count == 1 && b.received.count == 1)
        }
    }

    @Test func configCheckProbeTriesTheServerAndEachSink() async throws {
        try await withRelay(b: WebhookReceiver { _, _ in .init(404, body: "no such hook") }) { setup, base, a, b in
            let env = ["ALLOWANCE_RELAY_SERVER_URL": base.absoluteString, "ALLOWANCE_RELAY_SERVER_TOKEN": "e2e-token"]
            let check = try RelayProcess(
                env: env, arguments: ["config", "check", "--config", setup.config, "--probe", "--json"])
            #expect(await check.wait() == 1, "a sink refused the test alert: exit 1")
            let json = try JSONValue(parsing: Array(check.output.utf8))
            let probes = json["probes"]?.arrayValue ?? []
            #expect(probes.map { $0["ok"]?.boolValue } == [true, true, true, false], "\(check.output)")
            #expect(
                probes[1]["result"]?.stringValue?.hasPrefix("connected over") == true, "the hub, as run connects to it")
            #expect(probes.first?["result"]?.stringValue == "answered: 3 child(ren)")
            #expect(probes.last?["result"]?.stringValue?.contains("404") == true)
            #expect(a.received.count == 1 && b.received.count == 1)

            let refused = try RelayProcess(
                env: env.merging(["ALLOWANCE_RELAY_SERVER_TOKEN": "wrong-token"]) { $1 },
                arguments: ["config", "check", "--config", setup.config, "--probe"])
            #expect(await refused.wait() == 1)
            #expect(refused.output.contains("FAIL server"), "\(refused.output)")
            #expect(!refused.output.contains("wrong-token"), "the token never reaches the output")
        }
    }

    /// The probe runs what `run` runs, so it fails where `run` would, naming the URL it asked and the fix: a misspelt
    /// hub path (it passed, then `run` retried negotiate's 404 for ever), a server.url ending in /api, a URL of
    /// another service.
    @Test func configCheckProbeNamesTheURLAndTheFixWhereRunWouldFail() async throws {
        let foreign = WebhookReceiver { _, _ in .init(501, body: "Not Implemented") }
        try await foreign.run { other in
            try await withRelay { setup, base, a, b in
                func probe(_ env: [String: String]) async throws -> [String] {
                    let check = try RelayProcess(
                        env: ["ALLOWANCE_RELAY_SERVER_TOKEN": "e2e-token"].merging(env) { $1 },
                        arguments: ["config", "check", "--config", setup.config, "--probe"])
                    #expect(await check.wait() == 1, "\(check.output)")
                    return check.output.split(separator: "\n").map(String.init).filter { $0.contains("FAIL") }
                }
                let path = try await probe([
                    "ALLOWANCE_RELAY_SERVER_URL": base.absoluteString,
                    "ALLOWANCE_RELAY_SERVER_HUB_PATH": "/hubs/famliy",
                ])
                #expect(path.count == 1 && path[0].contains("FAIL hub") && path[0].contains("/hubs/famliy"), "\(path)")
                #expect(path.first?.hasSuffix("did you mean server.hub_path: /hubs/family?") == true, "\(path)")

                let root =
                    base.absoluteString.hasSuffix("/") ? String(base.absoluteString.dropLast()) : base.absoluteString
                let api = try await probe(["ALLOWANCE_RELAY_SERVER_URL": root + "/api"])
                let server = api.first { $0.contains("FAIL server") } ?? ""
                #expect(server.contains("GET \(root)/api/api/v1/children"), "the URL actually requested: \(api)")
                #expect(server.contains("server.url must be the site root, not .../api: try \(root)"), "\(api)")

                let elsewhere = try await probe(["ALLOWANCE_RELAY_SERVER_URL": other.absoluteString])
                #expect(
                    elsewhere.contains {
                        $0.contains("FAIL server") && $0.contains("501")
                            && $0.contains("This is not an Allowance Tracker API")
                    },
                    "\(elsewhere)")
            }
        }
    }

    @Test func aPortInUseEndsTheStartWithAMessageNamingStatusListen() async throws {
        try await withSim { base in
            let setup = try Setup(a: base, b: base)
            let holder = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            defer { close(holder) }
            var addr = sockaddr_in()
            addr.sin_family = sa_family_t(AF_INET)
            addr.sin_port = in_port_t(UInt16(setup.port).bigEndian)
            addr.sin_addr.s_addr = inet_addr("127.0.0.1")
            let bound = withUnsafePointer(to: &addr) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    bind(holder, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
            try #require(bound == 0 && listen(holder, 1) == 0)
            try setup.write(to: "a")
            let relay = try setup.start(base)
            #expect(await relay.wait() == 1)
            #expect(relay.output.contains("status.listen 127.0.0.1:\(setup.port): cannot serve"), "\(relay.output)")
        }
    }
}
