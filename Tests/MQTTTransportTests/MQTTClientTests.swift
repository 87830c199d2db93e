import Foundation
import MQTTTransport
import Synchronization
import TestSupport
import Testing

/// The MQTT connection against a real broker (Debian's mosquitto, started by the test in a temporary folder).
// Skipped only outside CI: there a missing broker fails the suite rather than hiding it.
@Suite(
    .enabled(
        if: MosquittoBroker.binary != nil || ProcessInfo.processInfo.environment["CI"] != nil,
        "mosquitto is not installed"))
struct MQTTClientTests {
    func client(_ broker: MosquittoBroker, _ id: String) throws -> MQTTClient {
        try MQTTClient(MQTTClient.Options(host: "127.0.0.1", port: broker.port, clientId: id))
    }

    /// Waits until `condition` holds, at most `seconds`; false when it never did.
    func eventually(_ seconds: Double, _ condition: () -> Bool) async -> Bool {
        let deadline = ContinuousClock.now + .seconds(seconds)
        while !condition() {
            guard ContinuousClock.now < deadline else { return false }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return true
    }

    @Test func aPublishReturnsOnceTheBrokerHasItAndASubscriberGetsIt() async throws {
        let broker = try await MosquittoBroker()
        try await broker.start()
        let listener = try client(broker, "listener")
        let seen = Mutex<[(String, String)]>([])
        listener.onMessage = { topic, payload in
            seen.withLock { $0.append((topic, String(decoding: payload, as: UTF8.self))) }
        }
        #expect(await listener.waitConnected(timeout: .seconds(10)))
        listener.subscribe("family/#")
        let sender = try client(broker, "sender")
        #expect(await sender.waitConnected(timeout: .seconds(10)))
        // The subscription is made when the broker answers it: a retained message reaches it whenever that is.
        try await sender.publish("family/alice", Array("spent 3.50".utf8), retain: true, timeout: .seconds(5))
        try await sender.publish("family/bob", Array("got 5.00".utf8), timeout: .seconds(5))
        #expect(await eventually(10) { seen.withLock { $0.contains { $0 == ("family/alice", "spent 3.50") } } })
        // A later subscriber gets the retained one only.
        let late = try client(broker, "late")
        let lateSeen = Mutex<[String]>([])
        late.onMessage = { topic, _ in lateSeen.withLock { $0.append(topic) } }
        #expect(await late.waitConnected(timeout: .seconds(10)))
        late.subscribe("family/#")
        #expect(await eventually(10) { !lateSeen.withLock { $0 }.isEmpty })
        #expect(lateSeen.withLock { $0 } == ["family/alice"])
        await sender.close()
        await listener.close()
        await late.close()
    }

    /// A publish returns only once the broker acknowledged it (QoS 1's PUBACK): with the broker hung (SIGSTOP, its
    /// socket still open) it waits and times out, and one made then completes only after the broker answers again.
    @Test func aPublishWaitsForTheBrokersAcknowledgement() async throws {
        let broker = try await MosquittoBroker()
        let sender = try client(broker, "sender")
        #expect(await sender.waitConnected(timeout: .seconds(10)))
        try await sender.publish("family/ok", Array("first".utf8), timeout: .seconds(5))  // answered: returns
        broker.freeze()
        defer { broker.thaw() }
        let began = ContinuousClock.now
        await #expect(throws: MQTTError.self, "no acknowledgement, no success") {
            try await sender.publish("family/alice", Array("x".utf8), timeout: .seconds(1))
        }
        #expect(ContinuousClock.now - began >= .seconds(1), "it waited the whole timeout for the broker")
        let done = Mutex(false)
        let pending = Task {
            try await sender.publish("family/bob", Array("y".utf8), timeout: .seconds(20))
            done.withLock { $0 = true }
        }
        try await Task.sleep(for: .milliseconds(500))
        #expect(!done.withLock { $0 }, "still waiting while the broker is hung")
        broker.thaw()
        try await pending.value
        #expect(done.withLock { $0 })
        await sender.close()
    }

    @Test func aPublishWithoutAConnectionFailsAtOnce() async throws {
        let broker = try await MosquittoBroker()
        try await broker.start()
        let sender = try client(broker, "never-started")
        let started = ContinuousClock.now
        do throws(MQTTError) {
            try await sender.publish("family/alice", Array("x".utf8), timeout: .seconds(5))
            Issue.record("published without a connection")
        } catch {
            #expect(error.message.contains("family/alice"), "\(error.message)")
        }
        #expect(ContinuousClock.now - started < .seconds(5), "it did not wait for the acknowledgement's timeout")
    }
}
