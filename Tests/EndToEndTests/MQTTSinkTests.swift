import AllowanceAPI
import Foundation
import SignalRProtocol
import Store
import TestSupport
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The MQTT sink against a real Mosquitto broker, witnessed by paho-mqtt (PyPI): Home Assistant's discovery
/// messages, the retained state per child, the availability topic with its last will, and a broker restart in the
/// middle of a burst.
@Suite(.serialized, .timeLimit(.minutes(3))) struct MQTTSinkTests {
    func config(_ broker: MosquittoBroker, sinkExtra: String = "") throws -> (file: String, store: String) {
        let dir = FileManager.default.temporaryDirectory.appending(path: "relay-mqtt-\(UUID())")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let yaml = """
            sinks:
              home:
                type: mqtt
                url: \(broker.url)
            \(sinkExtra)
            """
        let file = dir.appending(path: "relay.yaml").path
        try yaml.write(toFile: file, atomically: true, encoding: .utf8)
        return (file, dir.appending(path: "relay.sqlite").path)
    }

    /// The broker's retained messages now, as a fresh subscriber sees them.
    func retained(_ broker: MosquittoBroker, user: [String] = []) async throws -> [String: String] {
        let run = try await PythonPeer.run(
            script: "mqtt_subscriber.py", arguments: ["retained", "127.0.0.1", String(broker.port)] + user, input: "")
        guard case .object(let members)? = try? JSONValue(parsing: Array(run.output.utf8)) else {
            throw HarnessError("retained: \(run.output)")
        }
        return Dictionary(uniqueKeysWithValues: members.map { ($0.key, $0.value.stringValue ?? "") })
    }

    /// The relay on `file` against the simulator, caught up, and its store.
    func startRelay(_ base: URL, _ file: String, _ storePath: String) async throws -> (RelayProcess, Store) {
        let relay = try RelayProcess(env: simRelayEnv(base, store: storePath), arguments: ["run", "--config", file])
        #expect(await relay.waitFor("caught up"))
        return (relay, try Store.open(path: storePath))
    }

    func delivered(_ store: Store) throws -> Int { try store.deliveryCounts()["home"]?["delivered"] ?? 0 }

    /// Home Assistant's device-based discovery topic of a child's device, for the default base topic.
    static func deviceTopic(_ child: String) -> String {
        "homeassistant/device/allowance_relay_allowance_\(object(child))/config"
    }

    /// The children's device messages the broker keeps, by child id.
    func devices(_ broker: MosquittoBroker) async throws -> [String: JSONValue] {
        let prefix = "homeassistant/device/allowance_relay_allowance_"
        var out: [String: JSONValue] = [:]
        for (topic, text) in try await retained(broker) where topic.hasPrefix(prefix) && !text.isEmpty {
            let object = Array(topic.dropFirst(prefix.count).dropLast("/config".count))
            guard object.count == 32 else { continue }
            let id = [object[0..<8], object[8..<12], object[12..<16], object[16..<20], object[20..<32]].map {
                String($0)
            }.joined(separator: "-")
            out[id] = try JSONValue(parsing: Array(text.utf8))
        }
        return out
    }

    /// Publishes as Home Assistant (or a user clearing the broker) would.
    func publish(_ broker: MosquittoBroker, _ topic: String, _ payload: String, retain: Bool) async throws {
        let run = try await PythonPeer.run(
            script: "mqtt_subscriber.py",
            arguments: ["publish", "127.0.0.1", String(broker.port), topic, payload, retain ? "retain" : "once"],
            input: "")
        guard run.output.contains("published") else { throw HarnessError("publish: \(run.output)") }
    }

    static func object(_ id: String) -> String { id.replacingOccurrences(of: "-", with: "") }

    /// A new relay with no alert to send: Home Assistant sees it online, the device, every child and each balance.
    @Test func homeAssistantSeesTheWholeFamilyBeforeAnyAlert() async throws {
        try #require(PythonPeer.available)
        let broker = try await MosquittoBroker()
        defer { broker.stop() }
        let (file, storePath) = try config(broker)
        try await withSim { base in
            let (relay, store) = try await startRelay(base, file, storePath)
            let children = try store.children()
            #expect(children.count == 3)
            #expect(
                await eventually(.seconds(10)) { (try? await devices(broker))?.count == 3 },
                "\(relay.output.suffix(2000))")
            #expect(try delivered(store) == 0, "nothing was sent as an alert")
            let seen = try await retained(broker)
            #expect(seen["allowance/status"] == "online")
            let published = try await devices(broker)
            for child in children {
                let id = child.id.uuidString.lowercased()
                let device = try #require(published[id])
                let origin = try #require(device["origin"])
                #expect(origin["name"]?.stringValue == "allowance-relay")
                #expect(
                    origin["sw_version"]?.stringValue?.isEmpty == false
                        && origin["support_url"]?.stringValue?.hasPrefix("https://") == true)
                #expect(device["device"]?["name"]?.stringValue == child.firstName)
                #expect(device["components"]?["balance"]?["platform"]?.stringValue == "sensor")
                #expect(device["components"]?["balance"]?["state_class"]?.stringValue == "total")
                #expect(device["components"]?["transaction"]?["platform"]?.stringValue == "event")
                let state = try JSONValue(parsing: Array((seen["allowance/child/\(id)/state"] ?? "").utf8))
                #expect(
                    state["balance"]?.stringValue.flatMap { Decimal(string: $0) } == child.currentBalance, "\(state)")
                #expect(state["child"]?.stringValue == child.firstName)
                // The cached balance's time, as after any restart: a dashboard says how old it is.
                let at = try #require(state["updated_at"]?.stringValue.flatMap(ISODate.parse), "\(state)")
                #expect(abs(at.timeIntervalSinceNow) < 120, "\(state)")
            }
            await relay.expectCleanStop()
        }
    }

    /// Home Assistant restarts having lost the retained messages (a broker without persistence): its birth message
    /// brings the device and every balance back. A child deleted on the server while the relay was stopped loses
    /// its entities at the next start.
    @Test func aRestartOfEitherSideKeepsHomeAssistantTrue() async throws {
        try #require(PythonPeer.available)
        let broker = try await MosquittoBroker()
        defer { broker.stop() }
        let (file, storePath) = try config(broker)
        let bob = "22222222-2222-4222-8222-222222222222"
        try await withSim { base in
            var (relay, store) = try await startRelay(base, file, storePath)
            #expect(await eventually(.seconds(10)) { (try? await devices(broker))?.count == 3 })
            // Home Assistant's side: the retained messages are gone, then it says it is back.
            for id in try await devices(broker).keys {
                try await publish(broker, Self.deviceTopic(id), "", retain: true)
            }
            try await publish(broker, "allowance/child/\(bob)/state", "", retain: true)
            #expect(try await devices(broker).isEmpty)
            try await publish(broker, "homeassistant/status", "online", retain: false)
            #expect(
                await eventually(.seconds(10)) { (try? await devices(broker))?.count == 3 },
                "\(relay.output.suffix(2000))")
            #expect(
                await eventually(.seconds(10)) { (try? await retained(broker))?["allowance/child/\(bob)/state"] != nil }
            )
            // The relay's side: stopped, Bob deleted on the server meanwhile, started again.
            await relay.expectCleanStop()
            #expect(try await retained(broker)["allowance/status"] == "offline")
            try await deleteChildOnTheServer(base, bob)
            (relay, store) = try await startRelay(base, file, storePath)
            #expect(try store.children().map(\.firstName) == ["Alice", "Carol"])
            // Home Assistant's rule: an empty retained config removes the device and its entities.
            let listed = Set(try store.children().map(\.id.lowercased))
            let matched = await eventually(.seconds(10)) { (try? await devices(broker)).map { Set($0.keys) } == listed }
            let shown = try? await devices(broker).keys
            #expect(matched, "\(String(describing: shown))")
            #expect(
                try await retained(broker)["allowance/child/\(bob)/state"] == nil,
                "the deleted child's balance is cleared")
            #expect(try await retained(broker)["allowance/status"] == "online")
            await relay.expectCleanStop()
        }
    }

    func deleteChildOnTheServer(_ base: URL, _ id: String) async throws {
        var request = URLRequest(url: base.appending(path: "api/v1/children/\(id)"))
        request.httpMethod = "DELETE"
        request.setValue("Bearer e2e-token", forHTTPHeaderField: "Authorization")
        #expect((try await TestHTTP.data(for: request).1 as? HTTPURLResponse)?.statusCode == 204)
    }

    /// A child deleted on the server while the relay runs: the next catch-up (here after a reconnect) removes its device.
    @Test func aChildDeletedWhileTheRelayRunsLosesItsDevice() async throws {
        try #require(PythonPeer.available)
        let broker = try await MosquittoBroker()
        defer { broker.stop() }
        let (file, storePath) = try config(broker)
        let carol = "33333333-3333-4333-8333-333333333333"
        try await withSim { base in
            let (relay, _) = try await startRelay(base, file, storePath)
            #expect(await eventually(.seconds(10)) { (try? await devices(broker))?.count == 3 })
            try await deleteChildOnTheServer(base, carol)
            try await simPost(base, "/_sim/drop")
            #expect(await relay.waitFor(count: 2, of: "caught up", timeout: .seconds(30)))
            #expect(
                await eventually(.seconds(10)) {
                    (try? await devices(broker)).map { $0[carol] == nil && $0.count == 2 } ?? false
                })
            #expect(try await retained(broker)["allowance/child/\(carol)/state"] == nil)
            await relay.expectCleanStop()
        }
    }

    /// A broker that still holds the older per-entity discovery messages: they are cleared, the device replaces them.
    @Test func theOlderPerEntityDiscoveryMessagesAreCleared() async throws {
        try #require(PythonPeer.available)
        let broker = try await MosquittoBroker()
        defer { broker.stop() }
        let (file, storePath) = try config(broker)
        let old = "homeassistant/sensor/allowance_relay_allowance/11111111111141118111111111111111_balance/config"
        try await publish(broker, old, #"{"name":"Alice balance"}"#, retain: true)
        #expect(try await retained(broker)[old] != nil)
        try await withSim { base in
            let (relay, _) = try await startRelay(base, file, storePath)
            #expect(
                await eventually(.seconds(10)) { (try? await retained(broker))?[old] == nil },
                "\(relay.output.suffix(1000))")
            #expect(try await devices(broker).count == 3)
            await relay.expectCleanStop()
        }
    }

    @Test func homeAssistantFindsEachChildWithItsBalanceAndTheRelaySaysWhenItIsGone() async throws {
        try #require(PythonPeer.available)
        let broker = try await MosquittoBroker()
        defer { broker.stop() }
        let (file, storePath) = try config(broker)
        try await withSim { base in
            let (relay, store) = try await startRelay(base, file, storePath)
            try await simPost(base, "/_sim/burst?count=6")
            // Six transactions, and a balance change for each (the default rules give an MQTT sink balance.updated).
            #expect(await eventually { (try? delivered(store)) ?? 0 >= 12 }, "\(relay.output.suffix(2000))")
            let children = try store.children()
            let touched = Set(try store.transactions().map(\.childId))
            let seen = try await retained(broker)
            #expect(seen["allowance/status"] == "online")
            for child in children where touched.contains(child.id) {
                let id = child.id.uuidString.lowercased()
                let object = id.replacingOccurrences(of: "-", with: "")
                let device = try JSONValue(parsing: Array((seen[Self.deviceTopic(id)] ?? "").utf8))
                #expect(
                    device["device"]?["identifiers"]?.arrayValue?.first?.stringValue
                        == "allowance_relay_allowance_\(object)")
                #expect(device["device"]?["name"]?.stringValue == child.firstName)
                let sensor = try #require(device["components"]?["balance"])
                #expect(sensor["platform"]?.stringValue == "sensor")
                #expect(
                    sensor["device_class"]?.stringValue == "monetary"
                        && sensor["unit_of_measurement"]?.stringValue == "USD")
                #expect(
                    sensor["state_class"]?.stringValue == "total", "a monetary sensor takes total, never measurement")
                #expect(sensor["state_topic"]?.stringValue == "allowance/child/\(id)/state")
                #expect(sensor["availability_topic"]?.stringValue == "allowance/status")
                let event = try #require(device["components"]?["transaction"])
                #expect(event["platform"]?.stringValue == "event")
                #expect(
                    event["event_types"] == ["credit", "debit"]
                        && event["state_topic"]?.stringValue == "allowance/child/\(id)/transaction")
                let state = try JSONValue(parsing: Array((seen["allowance/child/\(id)/state"] ?? "").utf8))
                // The balance the cache has from the server, exact, with the currency.
                #expect(
                    state["balance"]?.stringValue.flatMap { Decimal(string: $0) } == child.currentBalance, "\(state)")
                #expect(state["currency"]?.stringValue == "USD" && state["child"]?.stringValue == child.firstName)
                let last = try JSONValue(parsing: Array((seen["allowance/child/\(id)/last_transaction"] ?? "").utf8))
                #expect(["credit", "debit"].contains(last["event_type"]?.stringValue ?? ""))
            }
            await relay.expectCleanStop()
            #expect(try await retained(broker)["allowance/status"] == "offline", "a clean stop says offline")
        }
    }

    @Test func notifyTestPublishesAndProbeSaysWhatIsWrong() async throws {
        try #require(PythonPeer.available)
        let broker = try await MosquittoBroker(users: [("relay", "right-pass")])
        defer { broker.stop() }
        let dir = FileManager.default.temporaryDirectory.appending(path: "relay-mqtt-\(UUID())")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let out = dir.appending(path: "witness.jsonl").path
        let witness = try await PythonPeer(
            script: "mqtt_subscriber.py",
            arguments: ["follow", "127.0.0.1", String(broker.port), out, "relay", "right-pass"])
        defer { witness.stop() }
        func config(password: String) throws -> String {
            let (file, _) = try self.config(
                broker, sinkExtra: "    username: relay\n    password: \(password)\n    timeout_seconds: 3\n")
            return file
        }
        let sent = try RelayProcess(
            env: [:], arguments: ["notify", "test", "--config", try config(password: "right-pass"), "--sink", "home"])
        #expect(await sent.wait() == 0, "\(sent.output)")
        #expect(
            await eventually(.seconds(10)) {
                ((try? String(contentsOfFile: out, encoding: .utf8)) ?? "").contains(#"\"type\":\"test\""#)
            })
        let refused = try RelayProcess(
            env: ["ALLOWANCE_RELAY_SERVER_URL": "http://127.0.0.1:9", "ALLOWANCE_RELAY_SERVER_TOKEN": "t"],
            arguments: ["config", "check", "--config", try config(password: "wrong-pass"), "--probe"])
        #expect(await refused.wait() == 1)
        #expect(
            refused.output.contains("FAIL sink home (mqtt): mqtt: not connected to 127.0.0.1:\(broker.port)"),
            "\(refused.output)")
        #expect(refused.output.lowercased().contains("not authori"), "the broker's reason: \(refused.output)")
        #expect(!refused.output.contains("wrong-pass"))
    }

    @Test func aBrokerThatIsDownAtTheFirstAlertGetsItOnceItIsUp() async throws {
        try #require(PythonPeer.available)
        let broker = try await MosquittoBroker()
        defer { broker.stop() }
        broker.stop()  // the port is known, nothing listens on it
        let (file, storePath) = try config(broker)
        try await withSim { base in
            let (relay, store) = try await startRelay(base, file, storePath)
            try await simTransaction(base, amount: "1.00", type: "Credit")
            // Tried, and held for a retry: the send waited its timeout for a broker that is not there.
            #expect(
                await eventually(.seconds(30)) {
                    (try? store.deliveries(sink: "home").contains { $0.lastError?.contains("not connected") == true })
                        == true
                }, "\(relay.output.suffix(2000))")
            #expect(try delivered(store) == 0)
            try await broker.start()
            #expect(
                await eventually(.seconds(30)) { (try? delivered(store)) ?? 0 >= 1 }, "\(relay.output.suffix(2000))")
            #expect(try await retained(broker)["allowance/status"] == "online")
            await relay.expectCleanStop()
        }
    }

    @Test func theLastWillSaysOfflineWhenTheRelayIsKilled() async throws {
        try #require(PythonPeer.available)
        let broker = try await MosquittoBroker()
        defer { broker.stop() }
        let (file, storePath) = try config(broker)
        try await withSim { base in
            let (relay, store) = try await startRelay(base, file, storePath)
            try await simPost(base, "/_sim/burst?count=1")
            #expect(await eventually { (try? delivered(store)) ?? 0 >= 1 })
            #expect(try await retained(broker)["allowance/status"] == "online")
            _ = await relay.stop(signal: SIGKILL)
            // The broker notices the dropped connection (at once: the socket closes) and publishes the will.
            #expect(await eventually(.seconds(10)) { (try? await retained(broker)["allowance/status"]) == "offline" })
        }
    }

    /// The broker goes away in the middle of a burst: stopped as a service restart does (it saves its sessions), or
    /// crashed (SIGKILL: what it acknowledged but had not saved is gone on its side, so the witness may miss some;
    /// the relay's own promise holds either way: every delivery acknowledged, none given up).
    @Test(arguments: [false, true]) func aBrokerRestartInTheMiddleOfABurstLosesNothing(crash: Bool) async throws {
        try #require(PythonPeer.available)
        let broker = try await MosquittoBroker(users: [("relay", "s3cret-pass"), ("witness", "witness-pass")])
        defer { broker.stop() }
        let dir = FileManager.default.temporaryDirectory.appending(path: "relay-mqtt-\(UUID())")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let passwordFile = dir.appending(path: "mqtt-password").path
        try "s3cret-pass\n".write(toFile: passwordFile, atomically: true, encoding: .utf8)
        chmod(passwordFile, 0o600)
        let (file, storePath) = try config(
            broker,
            sinkExtra:
                "    username: relay\n    password_file: \(passwordFile)\n    protocol: 3.1.1\nrules:\n  - event: transaction.created\n    to: home\n"
        )
        // The witness keeps a session on the broker (QoS 1, no clean start), which the restart keeps (persistence).
        let out = dir.appending(path: "witness.jsonl").path
        let witness = try await PythonPeer(
            script: "mqtt_subscriber.py",
            arguments: ["follow", "127.0.0.1", String(broker.port), out, "witness", "witness-pass"])
        defer { witness.stop() }
        func witnessed() -> Set<String> {
            let lines = ((try? String(contentsOfFile: out, encoding: .utf8)) ?? "").split(separator: "\n")
            return Set(
                lines.compactMap { line -> String? in
                    guard let m = try? JSONValue(parsing: Array(line.utf8)),
                        m["topic"]?.stringValue?.hasSuffix("/transaction") == true,
                        let payload = m["payload"]?.stringValue,
                        let event = try? JSONValue(parsing: Array(payload.utf8))
                    else { return nil }
                    return event["id"]?.stringValue
                })
        }
        try await withSim { base in
            let before = Set(try await ServerTruth.transactions(base).map { $0.id.uuidString.lowercased() })
            let (relay, store) = try await startRelay(base, file, storePath)
            // 60 transactions over 2 s; the broker is away from 0.5 s to 1.5 s.
            let pacing = Task { try await simPost(base, "/_sim/paced?count=60&rate=30") }
            try await Task.sleep(for: .milliseconds(500))
            if crash { broker.crash() } else { broker.stop() }
            try await Task.sleep(for: .seconds(1))
            try await broker.start()
            try await pacing.value
            let server = Set(try await ServerTruth.transactions(base).map { $0.id.uuidString.lowercased() })
                .subtracting(before)
            #expect(
                await eventually(.seconds(60)) { (try? delivered(store)) ?? 0 >= server.count },
                "\(relay.output.suffix(3000))")
            #expect(try store.deliveries(sink: "home", state: .dead).isEmpty)
            // Every transaction reached the subscriber through the broker (some perhaps twice: QoS 1 is at least once);
            // after a crash, only what the broker kept, and never one the server does not have.
            if crash {
                #expect(witnessed().isSubset(of: server), "witnessed \(witnessed().count) of \(server.count)")
            } else {
                #expect(
                    await eventually(.seconds(20)) { witnessed() == server },
                    "witnessed \(witnessed().count) of \(server.count)")
            }
            #expect(!relay.output.contains("s3cret-pass"), "the password never reaches the logs")
            #expect(
                relay.output.contains("sink home: mqtt: lost the broker"),
                "the outage was met and said: \(relay.output.suffix(2000))")
            print("mqtt broker restart: \(server.count) transactions, all acknowledged and witnessed")
            ReliabilityFigures.record(
                crash ? "MQTT broker killed (SIGKILL) mid-burst, then up" : "MQTT broker restarted mid-burst",
                [("alerts", server.count), ("witnessed", witnessed().count)])
            // The retained state per child is the server's balance, and the last transaction left that balance.
            let seen = try await retained(broker, user: ["witness", "witness-pass"])
            let burst = try store.transactions(limit: 1000).filter { server.contains($0.id.uuidString.lowercased()) }
            for child in try store.children() where burst.contains(where: { $0.childId == child.id }) {
                let id = child.id.uuidString.lowercased()
                try #require(seen["allowance/child/\(id)/state"] != nil, "\(seen.keys.sorted())")
                let state = try JSONValue(parsing: Array((seen["allowance/child/\(id)/state"] ?? "").utf8))
                #expect(
                    state["balance"]?.stringValue.flatMap { Decimal(string: $0) } == child.currentBalance, "\(state)")
                let last = try JSONValue(parsing: Array((seen["allowance/child/\(id)/last_transaction"] ?? "").utf8))
                #expect(
                    last["balance_after"]?.stringValue.flatMap { Decimal(string: $0) } == child.currentBalance,
                    "\(last)")
            }
            await relay.expectCleanStop()
        }
    }
}
