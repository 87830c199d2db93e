import Foundation
import HubSimulator
import SignalRClient
import SignalRProtocol
import TestSupport
import Testing

/// A network that stops carrying packets without closing anything (no FIN, no RST), through a real TCP proxy:
/// only the server timeout can notice, and the reconnect must wait until the path works again.
@Suite(.timeLimit(.minutes(1))) struct NetworkCutTests {
    @Test func aCutWithoutFINIsFoundByTheServerTimeoutAndTheReconnectFollowsTheRepair() async throws {
        // The server pings well within the client's 2 s server timeout (as ASP.NET Core's 15 s within 30 s): only
        // the cut may trip it. (With the simulator's default 15 s pings every link timed out after 2 s, and the
        // reconnect after a short link now waits, so an invocation could meet a link going down.)
        try await withSimulator({ $0.keepAliveInterval = .milliseconds(500) }) { base in
            let proxy = try TCPProxy(to: base.port!)
            defer { proxy.close() }
            let url = URL(string: "http://127.0.0.1:\(proxy.port)/hubs/family")!
            let connection = HubConnection(
                url: url,
                options: options {
                    $0.serverTimeout = .seconds(2)
                    $0.keepAliveInterval = .milliseconds(500)
                    // Long enough for a negotiate on a machine busy with the rest of the suite (2 s was not, once).
                    $0.handshakeTimeout = .seconds(5)
                    $0.reconnectPolicy = ExponentialRetryPolicy(initial: .milliseconds(200), maximum: .seconds(1))
                }, logger: quietLogger())
            let events = await connection.events()
            try await connection.start()
            let before = try await connection.invoke("GetConnectionId", [])?.stringValue

            proxy.mode = .blackhole
            let lost = await waitForEvent(events) { if case .reconnecting = $0 { true } else { false } }
            #expect(
                lost == .reconnecting(reason: "Server timeout elapsed without receiving a message from the server."),
                "\(String(describing: lost))")
            // Reconnect attempts meanwhile hang in the hole (negotiate or handshake time out); none succeeds.
            let attemptsBefore = proxy.accepted
            try await Task.sleep(for: .seconds(3))
            #expect(proxy.accepted > attemptsBefore, "it kept trying during the cut")

            proxy.mode = .pass
            let back = await waitForEvent(events, timeout: .seconds(20)) {
                if case .reconnected = $0 { true } else { false }
            }
            #expect(back != nil)
            let after = try await connection.invoke("GetConnectionId", [])?.stringValue
            #expect(after != nil && after != before, "a new connection after the cut")
            await connection.stop()
        }
    }
}
