import Foundation
import SignalRClient
import SignalRProtocol
import TestSupport
import Testing

@Suite(.serialized, .timeLimit(.minutes(2))) struct StatefulReconnectTests {
    private func statefulOptions() -> HubConnectionOptions {
        options {
            $0.useStatefulReconnect = true
            $0.reconnectPolicy = ExponentialRetryPolicy(initial: .milliseconds(100), maximum: .milliseconds(200))
        }
    }

    @Test func aDroppedSocketReattachesAndReplaysWithoutLossOrDuplicate() async throws {
        try await withSimulator { base in
            let connection = HubConnection(url: hubURL(base), options: statefulOptions(), logger: quietLogger())
            let sequences = Collector<Int>()
            await connection.on("TransactionCreated") { (args: HubArguments) in
                sequences.append(try args.value(at: 0)["sequence"]?.intValue ?? -1)
            }
            let events = await connection.events()
            try await connection.start()
            let id = await connection.connectionId
            // 1...5 sent and the socket cut at once, before the client's coalesced Ack (a second after receipt): the
            // server will replay them too. 6...10 are sent while no socket is attached. Both happen in the server,
            // so a slow machine cannot let an Ack or a re-attach slip in between (it once did, between two requests).
            try await call(base, "POST", "/_sim/drop?before=5&detached=5")
            #expect(await sequences.wait(for: 5) == Array(1...5))
            let echo = Task { try await connection.invoke("Echo", ["sent while reconnecting"]) }
            let back = await waitForEvent(events) { if case .reconnected = $0 { true } else { false } }
            #expect(back == .reconnected(connectionId: id), "the same connection, re-attached")
            #expect(try await echo.value == "sent while reconnecting", "the client's buffered invocation was replayed")
            let all = await sequences.wait(for: 10)
            // Once the client acknowledged all it was sent, the server has nothing left to replay: a duplicate would
            // have come before the tenth event (delivery is in order), so none can come later.
            #expect(try await eventually { try await simStats(base).clients.first?["unacknowledged"] == 0 })
            #expect(
                sequences.values == Array(1...10), "every event once, in order: \(sequences.values) (got \(all.count))")
            let stats = try await simStats(base)
            #expect(stats["negotiations"] == 1, "a re-attach does not negotiate again")
            #expect(stats["reattachments"] == 1)
            // The server did send the events of 1...5 again (unacknowledged when the socket went) and those of 6...10,
            // two per transaction (TransactionCreated, BalanceUpdated): the client dropped the ten it had, so a replay
            // happened and the check above saw it deduplicated.
            #expect(stats["replayed"] == 20, "\(stats)")
            await connection.stop()
        }
    }

    @Test func whenTheServerForgotTheConnectionItFallsBackToANewOne() async throws {
        try await withSimulator { base in
            let connection = HubConnection(url: hubURL(base), options: statefulOptions(), logger: quietLogger())
            let events = await connection.events()
            try await connection.start()
            let firstId = await connection.connectionId
            let hanging = Task { try await connection.invoke("Hang") }
            try await Task.sleep(for: .milliseconds(200))
            try await call(base, "POST", "/_sim/drop?forget=true")
            await #expect(
                throws: HubConnectionError(
                    .stopped, "Invocation canceled due to the underlying connection being closed.")
            ) {
                try await hanging.value
            }
            let back = await waitForEvent(events) { if case .reconnected = $0 { true } else { false } }
            guard case .reconnected(let newId) = back else {
                Issue.record("no reconnect")
                return
            }
            #expect(newId != nil && newId != firstId, "a new connection after the server forgot the old one")
            #expect(try await connection.invoke("Echo", [1]) == 1)
            await connection.stop()
        }
    }

    @Test func withoutStatefulReconnectADropIsANewConnection() async throws {
        try await withSimulator { base in
            let connection = HubConnection(
                url: hubURL(base),
                options: options { $0.reconnectPolicy = ExponentialRetryPolicy(initial: .milliseconds(100)) },
                logger: quietLogger())
            let events = await connection.events()
            try await connection.start()
            let firstId = await connection.connectionId
            try await call(base, "POST", "/_sim/drop")
            let back = await waitForEvent(events) { if case .reconnected = $0 { true } else { false } }
            #expect(back != .reconnected(connectionId: firstId))
            #expect(try await simStats(base)["negotiations"] == 2)
            await connection.stop()
        }
    }
}
