import Foundation
import HubSimulator
import Hummingbird
import HummingbirdWebSocket
import NIOCore
import SignalRClient
import SignalRProtocol
import TestSupport
import Testing

@Suite(.serialized, .timeLimit(.minutes(2))) struct HubConnectionTests {
    @Test func receivesEventsInOrderFromTheFirstMessage() async throws {
        try await withSimulator { base in
            let connection = HubConnection(url: hubURL(base), options: options(), logger: quietLogger())
            let sequences = Collector<Int>()
            let balances = Collector<Decimal>()
            // Registered before start: must see the very first message.
            await connection.on("TransactionCreated") { (args: HubArguments) in
                let t = try args.value(at: 0)
                sequences.append(t["sequence"]?.intValue ?? -1)
            }
            await connection.on("BalanceUpdated") { (args: HubArguments) in
                balances.append(try args.decode(1, as: Decimal.self))
            }
            try await connection.start()
            #expect(await connection.state == .connected)
            #expect(await connection.connectionId != nil)
            try await call(base, "POST", "/_sim/burst?count=50")
            #expect(await sequences.wait(for: 50) == Array(1...50))
            #expect(await balances.wait(for: 50).count == 50)
            await connection.stop()
            #expect(await connection.state == .disconnected)
        }
    }

    @Test func balanceArrivesAsAnExactDecimal() async throws {
        try await withSimulator { base in
            let connection = HubConnection(url: hubURL(base), options: options(), logger: quietLogger())
            let balances = Collector<Decimal>()
            await connection.on("BalanceUpdated") { (args: HubArguments) in
                balances.append(try args.decode(1, as: Decimal.self))
            }
            try await connection.start()
            try await call(
                base, "POST", "/api/v1/transactions",
                body:
                    #"{"childId":"11111111-1111-4111-8111-111111111111","amount":19.99,"type":"Credit","description":"Chores"}"#
            )
            #expect(await balances.wait(for: 1) == [Decimal(string: "45.49")!])  // 25.50 + 19.99
            await connection.stop()
        }
    }

    @Test func invokeReturnsResultsErrorsAndVoid() async throws {
        try await withSimulator { base in
            let connection = HubConnection(url: hubURL(base), options: options(), logger: quietLogger())
            try await connection.start()
            #expect(try await connection.invoke("Echo", ["hello"]) == "hello")
            #expect(try await connection.invoke("Add", [2, 40], returning: Int.self) == 42)
            #expect(try await connection.invoke("Void") == nil)
            await #expect(throws: HubConnectionError(.invocationFailed(target: "Fail"), "nope")) {
                try await connection.invoke("Fail", ["nope"])
            }
            await #expect(
                throws: HubConnectionError(
                    .invocationFailed(target: "Nope"),
                    "Failed to invoke 'Nope' due to an error on the server. HubException: Method does not exist.")
            ) {
                try await connection.invoke("Nope")
            }
            try await connection.send("Echo", ["fire and forget"])
            #expect(try await connection.invoke("Echo", [1]) == 1, "the connection still works after send")
            await connection.stop()
        }
    }

    @Test func answersClientResultInvocations() async throws {
        try await withSimulator { base in
            let connection = HubConnection(url: hubURL(base), options: options(), logger: quietLogger())
            await connection.onResult("GetStatus") { (_: HubArguments) async throws -> JSONValue? in "all good" }
            await connection.onResult("Broken") { (_: HubArguments) async throws -> JSONValue? in
                struct Oops: Error, CustomStringConvertible { var description: String { "disk on fire" } }
                throw Oops()
            }
            await connection.onResult("Twice") { (_: HubArguments) async throws -> JSONValue? in 1 }
            await connection.onResult("Twice") { (_: HubArguments) async throws -> JSONValue? in 2 }
            try await connection.start()
            #expect(try await call(base, "POST", "/_sim/invoke?target=GetStatus") == [["result": "all good"]])
            #expect(
                try await call(base, "POST", "/_sim/invoke?target=Missing") == [
                    ["error": "Client didn't provide a result."]
                ])
            #expect(try await call(base, "POST", "/_sim/invoke?target=Broken") == [["error": "disk on fire"]])
            #expect(
                try await call(base, "POST", "/_sim/invoke?target=Twice") == [
                    ["error": "Client provided multiple results."]
                ])
            await connection.stop()
        }
    }

    @Test func streamsAndCancelsAStream() async throws {
        try await withSimulator { base in
            let connection = HubConnection(url: hubURL(base), options: options(), logger: quietLogger())
            try await connection.start()
            var items: [Int] = []
            for try await item in await connection.stream("Counter", [5, 1]) { items.append(item.intValue ?? -1) }
            #expect(items == [0, 1, 2, 3, 4])
            var seen = 0
            for try await _ in await connection.stream("Counter", [10_000, 20]) {
                seen += 1
                if seen == 3 { break }
            }
            // The CancelInvocation reaches the server.
            #expect(try await simStat(base, "canceledStreams", reaching: 1) == 1)
            await connection.stop()
        }
    }

    @Test func aHandlerCanInvokeOnTheSameConnectionWithoutDeadlock() async throws {
        try await withSimulator { base in
            let connection = HubConnection(url: hubURL(base), options: options(), logger: quietLogger())
            let received = Collector<JSONValue>()
            let echoed = Collector<JSONValue>()
            await connection.on("TransactionCreated") { [connection] (args: HubArguments) in
                let id = try args.value(at: 0)["id"] ?? .null
                received.append(id)
                echoed.append(try await connection.invoke("Echo", [id]) ?? .null)
            }
            try await connection.start()
            try await call(base, "POST", "/_sim/burst?count=5")
            let values = await echoed.wait(for: 5)
            let ids = await received.wait(for: 5)
            // Each handler got its own transaction's id back, in the order the transactions came.
            #expect(values == ids && Set(ids).count == 5)
            #expect(ids.allSatisfy { $0.stringValue.flatMap(UUID.init(uuidString:)) != nil }, "\(ids)")
            await connection.stop()
        }
    }

    @Test func sendsPingsWhenIdle() async throws {
        try await withSimulator { base in
            let connection = HubConnection(
                url: hubURL(base), options: options { $0.keepAliveInterval = .milliseconds(200) }, logger: quietLogger()
            )
            try await connection.start()
            // At 200 ms, three pings take 0.6 s. The deadline is far longer because the suites run side by side on
            // two cores and a timer can wake late; a client that ignored the interval (15 s by default) still fails.
            let started = ContinuousClock.now
            var pings = 0
            while pings < 3, ContinuousClock.now - started < .seconds(5) {
                try await Task.sleep(for: .milliseconds(100))
                let stats = try await simStats(base)
                pings = stats.clients.first?["pingsReceived"] ?? 0
            }
            #expect(pings >= 3, "got \(pings) pings in 5 s at a 200 ms interval")
            await connection.stop()
        }
    }

    @Test func serverSilenceTripsTheServerTimeout() async throws {
        try await withSimulator { base in
            let connection = HubConnection(
                url: hubURL(base), options: options { $0.serverTimeout = .seconds(1) }, logger: quietLogger())
            let events = await connection.events()
            try await connection.start()
            _ = try await connection.invoke("Silence", [5000])
            let closed = await waitForEvent(events) { if case .closed = $0 { true } else { false } }
            #expect(
                closed
                    == .closed(
                        error: HubConnectionError(
                            .serverTimeout, "Server timeout elapsed without receiving a message from the server.")))
        }
    }

    @Test func closeWithAllowReconnectReconnectsWithHandlersIntact() async throws {
        try await withSimulator { base in
            let connection = HubConnection(
                url: hubURL(base), options: options { $0.reconnectPolicy = DefaultRetryPolicy() }, logger: quietLogger()
            )
            let received = Collector<String>()
            await connection.on("TransactionCreated") { (_: HubArguments) in received.append("t") }
            let events = await connection.events()
            try await connection.start()
            let firstId = await connection.connectionId
            try await call(base, "POST", "/_sim/close?allowReconnect=true&error=maintenance")
            let reconnected = await waitForEvent(events) { if case .reconnected = $0 { true } else { false } }
            guard case .reconnected(let newId) = reconnected else {
                Issue.record("no reconnect: \(String(describing: reconnected))")
                return
            }
            #expect(newId != nil && newId != firstId, "a reconnect is a whole new connection")
            try await call(base, "POST", "/_sim/burst?count=3")
            #expect(await received.wait(for: 3).count == 3)
            await connection.stop()
        }
    }

    @Test func droppedConnectionReconnectsAndPendingInvocationsFail() async throws {
        try await withSimulator { base in
            let connection = HubConnection(
                url: hubURL(base),
                options: options { $0.reconnectPolicy = ExponentialRetryPolicy(initial: .milliseconds(100)) },
                logger: quietLogger())
            let events = await connection.events()
            try await connection.start()
            let hanging = Task { try await connection.invoke("Hang") }
            try await Task.sleep(for: .milliseconds(200))
            try await call(base, "POST", "/_sim/drop")
            await #expect(
                throws: HubConnectionError(
                    .stopped, "Invocation canceled due to the underlying connection being closed.")
            ) {
                try await hanging.value
            }
            #expect(await waitForEvent(events) { if case .reconnected = $0 { true } else { false } } != nil)
            #expect(try await connection.invoke("Echo", ["after"]) == "after")
            await connection.stop()
        }
    }

    @Test func closeWithoutAllowReconnectIsFinal() async throws {
        try await withSimulator { base in
            let connection = HubConnection(
                url: hubURL(base), options: options { $0.reconnectPolicy = DefaultRetryPolicy() }, logger: quietLogger()
            )
            let events = await connection.events()
            try await connection.start()
            try await call(base, "POST", "/_sim/close?error=boom")
            let closed = await waitForEvent(events) { if case .closed = $0 { true } else { false } }
            #expect(
                closed
                    == .closed(
                        error: HubConnectionError(
                            .closedByServer(allowReconnect: false), "Server returned an error on close: boom")))
            #expect(await connection.state == .disconnected)
        }
    }

    @Test func unknownMessageTypesAreIgnoredAndTheLinkStays() async throws {
        try await withSimulator { base in
            let connection = HubConnection(url: hubURL(base), options: options(), logger: quietLogger())
            let notices = Collector<String>()
            await connection.on("SimNotice") { (args: HubArguments) in
                notices.append(try args.decode(0, as: String.self))
            }
            try await connection.start()
            try await call(base, "POST", "/_sim/malformed?kind=unknown")
            #expect(await notices.wait(for: 1).count == 1)
            #expect(await connection.state == .connected)
            await connection.stop()
        }
    }

    @Test func wrongArgumentTypeNamesTargetAndIndex() async throws {
        try await withSimulator { base in
            let connection = HubConnection(url: hubURL(base), options: options(), logger: quietLogger())
            let errors = Collector<String>()
            await connection.on("BalanceUpdated") { (args: HubArguments) in
                do throws(HubProtocolError) {
                    _ = try args.decode(1, as: Decimal.self)
                } catch {
                    errors.append(
                        error.code == .argument(target: "BalanceUpdated", index: 1)
                            ? error.message : "wrong code: \(error.code)")
                }
            }
            try await connection.start()
            try await call(base, "POST", "/_sim/malformed?kind=args")
            let messages = await errors.wait(for: 1)
            #expect(messages.first?.hasPrefix("Argument 1 of 'BalanceUpdated' is not a Decimal (got a string)") == true)
            #expect(await connection.state == .connected, "a type mismatch is the handler's problem, not the link's")
            await connection.stop()
        }
    }

    @Test func refusedTokenGetsOneFreshTokenThenAClearError() async throws {
        try await withSimulator { base in
            let asked = Collector<Int>()
            var o = HubConnectionOptions()
            o.accessTokenProvider = {
                asked.append(1)
                return "wrong"
            }
            o.startRetryPolicy = DefaultRetryPolicy()
            let connection = HubConnection(url: hubURL(base), options: o, logger: quietLogger())
            await #expect {
                try await connection.start()
            } throws: { error in
                guard let e = error as? HubConnectionError else { return false }
                return e.kind == .unauthorized && e.message.contains("HTTP 401") && !e.message.contains("wrong")
            }
            #expect(asked.values.count == 2, "one token, one fresh token, no retry storm")
        }
    }

    @Test func retriesTheFirstStartUntilTheServerIsUp() async throws {
        let port = try freeLoopbackPortOutsideEphemeralRange()
        var o = options()
        o.startRetryPolicy = ExponentialRetryPolicy(initial: .milliseconds(200), maximum: .milliseconds(400))
        let connection = HubConnection(
            url: URL(string: "http://127.0.0.1:\(port)/hubs/family")!, options: o, logger: quietLogger())
        let starting = Task { try await connection.start() }
        try await Task.sleep(for: .milliseconds(800))
        try await withSimulator({ $0.port = port }) { _ in
            try await starting.value
            #expect(await connection.state == .connected)
            await connection.stop()
        }
    }

    /// A stop while the first start waits to retry (the server away, a long back-off) ends the start at once: a
    /// SIGTERM in back-off took up to the pause (10 s) to take effect.
    @Test func aStopDuringTheStartsBackOffEndsItAtOnce() async throws {
        let port = try freeLoopbackPortOutsideEphemeralRange()  // nobody listens
        var o = options()
        o.startRetryPolicy = ExponentialRetryPolicy(initial: .seconds(30), maximum: .seconds(30))
        let connection = HubConnection(
            url: URL(string: "http://127.0.0.1:\(port)/hubs/family")!, options: o, logger: quietLogger())
        let starting = Task { try await connection.start() }
        try await Task.sleep(for: .seconds(3))  // the first attempts have failed; a 30 s pause runs
        let asked = ContinuousClock.now
        await connection.stop()
        await #expect(throws: HubConnectionError.self) { try await starting.value }
        #expect(ContinuousClock.now - asked < .seconds(2), "the start ended with the stop, not after the pause")
    }

    @Test func followsNegotiateRedirectsWithTheNewToken() async throws {
        try await withSimulator { base in
            try await withRedirector(to: hubURL(base).absoluteString, token: testToken) { redirectorURL in
                // The original token is wrong for the simulator: only the redirect's token works.
                let connection = HubConnection(
                    url: redirectorURL, options: options(token: "only-for-the-redirector"), logger: quietLogger())
                try await connection.start()
                #expect(try await connection.invoke("Echo", ["via redirect"]) == "via redirect")
                await connection.stop()
            }
        }
    }

    @Test func endlessRedirectsStopAtTheLimit() async throws {
        try await withRedirector(to: nil, token: nil) { redirectorURL in
            let connection = HubConnection(url: redirectorURL, options: options(), logger: quietLogger())
            await #expect(throws: HubConnectionError(.negotiateFailed, "Negotiate redirection limit exceeded.")) {
                try await connection.start()
            }
        }
    }
}

/// A negotiate endpoint that redirects (Azure SignalR Service style) to `target`, or to itself forever when nil.
func withRedirector(to target: String?, token: String?, _ body: (URL) async throws -> Void) async throws {
    let router = Router()
    let (stream, continuation) = AsyncStream<Int>.makeStream()
    let portBox = PortBox()
    router.post("redirect/negotiate") { _, _ -> Response in
        let url = target ?? "http://127.0.0.1:\(portBox.port)/redirect"
        var fields: [(key: String, value: JSONValue)] = [("url", .string(url))]
        if let token { fields.append(("accessToken", .string(token))) }
        return Response(
            status: .ok, headers: [.contentType: "application/json"],
            body: .init(byteBuffer: ByteBuffer(string: JSONValue.object(fields).serialized)))
    }
    var logger = quietLogger()
    logger.logLevel = .critical
    let app = Application(
        router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)),
        onServerRunning: { continuation.yield($0.localAddress!.port!) }, logger: logger)
    try await withThrowingTaskGroup(of: Void.self) { group in
        group.addTask { try await app.runService(gracefulShutdownSignals: []) }
        var it = stream.makeAsyncIterator()
        let port = await it.next()!
        portBox.port = port
        defer { group.cancelAll() }
        try await body(URL(string: "http://127.0.0.1:\(port)/redirect")!)
    }
}

final class PortBox: @unchecked Sendable {
    // Written once before any request can arrive.
    var port = 0
}

@Suite(.serialized, .timeLimit(.minutes(1))) struct HubConnectionStartOptionsTests {
    @Test func skipNegotiationGoesStraightToTheSocket() async throws {
        try await withSimulator { base in
            let connection = HubConnection(
                url: hubURL(base), options: options { $0.skipNegotiation = true }, logger: quietLogger())
            try await connection.start()
            #expect(await connection.connectionId == nil, "no negotiate, no connection id")
            #expect(try await connection.invoke("Echo", ["direct"]) == "direct")
            #expect(try await simStats(base)["negotiations"] == 0)
            await connection.stop()
        }
    }

    @Test func tokenInTheQueryStringWorks() async throws {
        try await withSimulator { base in
            let connection = HubConnection(
                url: hubURL(base), options: options { $0.accessTokenInQuery = true }, logger: quietLogger())
            try await connection.start()
            #expect(try await connection.invoke("Echo", ["query"]) == "query")
            await connection.stop()
        }
    }

    @Test func aServerThatNeverAnswersTheHandshakeTimesOut() async throws {
        // A WebSocket server that accepts and then says nothing at all.
        let router = Router(context: BasicWebSocketRequestContext.self)
        router.ws("hub") { _, _ in
            .upgrade()
        } onUpgrade: { inbound, _, _ in
            for try await _ in inbound.messages(maxSize: 1 << 16) {}
        }
        let (stream, continuation) = AsyncStream<Int>.makeStream()
        let app = Application(
            router: Router(), server: .http1WebSocketUpgrade(webSocketRouter: router),
            configuration: .init(address: .hostname("127.0.0.1", port: 0)),
            onServerRunning: { continuation.yield($0.localAddress!.port!) }, logger: quietLogger())
        await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await app.runService(gracefulShutdownSignals: []) }
            var it = stream.makeAsyncIterator()
            let port = await it.next()!
            defer { group.cancelAll() }
            var o = HubConnectionOptions()
            o.skipNegotiation = true
            o.handshakeTimeout = .milliseconds(500)
            let connection = HubConnection(
                url: URL(string: "http://127.0.0.1:\(port)/hub")!, options: o, logger: quietLogger())
            let started = ContinuousClock.now
            await #expect(
                throws: HubConnectionError(
                    .handshakeFailed, "The server did not answer the handshake within 0.5 seconds.")
            ) {
                try await connection.start()
            }
            #expect(ContinuousClock.now - started < .seconds(5))
        }
    }
}
