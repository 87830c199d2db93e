import Foundation
import HubSimulator
import SignalRClient
import SignalRProtocol
import Synchronization
import TestSupport
import Testing

/// The hand-off from the connection to a consumer is bounded: a consumer that falls behind holds the hub back by
/// TCP (the connection stops reading), not by memory here, and nothing is lost on the way.
@Suite struct BackPressureTests {
    /// Counts each routed invocation as one event, reading its arguments in one pass.
    func counting(_ rejected: Collector<String>) -> HubEventDecoder<Int> {
        HubEventDecoder(
            targets: ["TransactionCreated", "BalanceUpdated"], read: { _, reader in reader.skipValue() ? 1 : nil },
            decode: { _, _ in 1 }, onError: { target, error in rejected.append("\(target): \(error)") })
    }

    @Test func aStalledThenSlowConsumerGetsEveryEventOfABlastWithinTheBoundAndTheLinkHolds() async throws {
        let capacity = 500
        let frame = 20  // messages per frame in this blast
        try await withSimulator({
            // The hub drops a client it has not heard from for 3 s: only the client's pings can keep it.
            $0.clientTimeout = .seconds(3)
            $0.keepAliveInterval = .milliseconds(500)
        }) { base in
            let connection = HubConnection(
                url: hubURL(base),
                options: options {
                    $0.keepAliveInterval = .milliseconds(300)
                    $0.serverTimeout = .seconds(2)  // shorter than the stall below: held back must not count as silence
                    $0.reconnectPolicy = DefaultRetryPolicy()
                    $0.webSocket.receiveBufferMessages = 64
                }, logger: quietLogger())
            let rejected = Collector<String>()
            let buffer = HubEventBuffer<Int>(capacity: capacity)
            await connection.on(counting(rejected), into: buffer)
            let lifecycle = await connection.events()
            let losses = Task { () -> [HubConnectionEvent] in
                var seen: [HubConnectionEvent] = []
                for await e in lifecycle {
                    if case .connected = e { continue }
                    seen.append(e)
                    if case .closed = e { break }
                }
                return seen
            }
            try await connection.start()

            let prepared = try await call(base, "POST", "/_sim/blast/prepare?count=50000&batch=\(frame)")
            let expected = prepared["events"]?.intValue ?? 0
            #expect(expected == 100_000)
            // The simulator answers `go` once its socket writer took every frame: not before we read them.
            let go = Task { try await call(base, "POST", "/_sim/blast/go") }

            // The consumer takes nothing for 4 s, then drains slowly (200 events every 2 ms at most).
            try await Task.sleep(for: .seconds(4))
            var received = 0
            var mostWaiting = 0
            var lastProgress = ContinuousClock.now
            // a lost event fails, not hangs
            while received < expected, ContinuousClock.now - lastProgress < .seconds(5) {
                mostWaiting = max(mostWaiting, buffer.count)
                if buffer.count > 0, let batch = await buffer.next(limit: 200) {
                    received += batch.count
                    lastProgress = .now
                }
                try await Task.sleep(for: .milliseconds(2))
            }

            _ = try await go.value
            #expect(received == expected, "nothing lost")
            #expect(rejected.values.isEmpty)
            // The connection hands over a backlog every 256 events (and a frame is not split): never the blast.
            #expect(mostWaiting <= capacity + 256 + frame, "\(mostWaiting) waiting at most")
            let stats = try await simStats(base)
            #expect(stats["totalConnections"] == 1, "the hub kept the link through the stall: our pings went out")
            let pings = stats.clients.first?["pingsReceived"] ?? 0
            #expect(pings >= 5, "pings flowed while the socket was not read: \(pings)")
            await connection.stop()
            #expect(await losses.value == [.closed(error: nil)], "no reconnect, no server timeout on our side")
        }
    }
}
