import Foundation
import HubSimulator
import SignalRProtocol
import TestSupport
import Testing

@testable import SignalRClient

/// The three transports and the two protocols, against the simulator (whose MessagePack, Server-Sent Events and Long
/// Polling are written apart from the client's), and the fallback of the official clients.
@Suite(.serialized, .timeLimit(.minutes(2))) struct TransportTests {
    static let combinations: [(TransportKind, HubProtocolKind)] = [
        (.webSockets, .json), (.webSockets, .messagepack), (.serverSentEvents, .json), (.longPolling, .json),
        (.longPolling, .messagepack),
    ]

    /// Events, an invocation with its result, and a clean stop, over each transport with each protocol it can carry.
    @Test(arguments: combinations.indices) func eventsAndInvocationsOverEachTransport(_ i: Int) async throws {
        let (transport, hubProtocol) = Self.combinations[i]
        try await withSimulator { base in
            let connection = HubConnection(
                url: hubURL(base),
                options: options {
                    $0.transports = [transport]
                    $0.hubProtocol = hubProtocol
                }, logger: quietLogger())
            let sequences = Collector<Int>()
            let balances = Collector<Decimal>()
            await connection.on("TransactionCreated") { (args: HubArguments) in
                let t = try args.value(at: 0)
                sequences.append(
                    (t["sequence"] ?? t["Sequence"])?.intValue ?? Int(t["Sequence"]?.stringValue ?? "") ?? -1)
            }
            await connection.on("BalanceUpdated") { (args: HubArguments) in
                balances.append(try args.decode(1, as: Decimal.self))
            }
            try await connection.start()
            #expect(await connection.transport == transport)
            try await call(base, "POST", "/_sim/burst?count=30")
            #expect(await sequences.wait(for: 30) == Array(1...30))
            #expect(await balances.wait(for: 30).count == 30)
            #expect(try await connection.invoke("Add", [.number("2"), .number("40")]) == .number("42"))
            #expect(try await connection.invoke("Echo", [.string("héllo")]) == .string("héllo"))
            await #expect(throws: HubConnectionError.self) { try await connection.invoke("Fail", [.string("no")]) }
            await connection.stop()
            #expect(await connection.state == .disconnected)
        }
    }

    /// A server with WebSockets off (or behind a proxy that strips the upgrade): the client goes on over the next
    /// transport the server offers, after a fresh negotiate.
    @Test func fallsBackWhenTheWebSocketIsRefused() async throws {
        try await withSimulator { base in
            let connection = HubConnection(url: hubURL(base), options: options(), logger: quietLogger())
            let balances = Collector<Decimal>()
            await connection.on("BalanceUpdated") { (args: HubArguments) in
                balances.append(try args.decode(1, as: Decimal.self))
            }
            // Offered, but every upgrade refused: what a proxy that strips `Upgrade` does.
            try await withSimulatorRefusingUpgrades(base) {
                try await connection.start()
            }
            #expect(await connection.transport == .serverSentEvents)
            try await call(base, "POST", "/_sim/burst?count=3")
            #expect(await balances.wait(for: 3).count == 3)
            let stats = try await simStats(base)
            #expect(stats["negotiations"] == 2, "one negotiate per transport tried")
            await connection.stop()
        }
    }

    /// MessagePack skips Server-Sent Events (text only) and takes Long Polling; JSON takes Server-Sent Events.
    @Test func aTransportThatCannotCarryTheProtocolIsSkipped() async throws {
        try await withSimulator({ $0.transports = ["ServerSentEvents", "LongPolling"] }) { base in
            for (hubProtocol, expected) in [
                (HubProtocolKind.messagepack, TransportKind.longPolling), (.json, .serverSentEvents),
            ] {
                let connection = HubConnection(
                    url: hubURL(base), options: options { $0.hubProtocol = hubProtocol }, logger: quietLogger())
                try await connection.start()
                #expect(await connection.transport == expected, "\(hubProtocol)")
                await connection.stop()
            }
        }
    }

    /// A transport the server did not offer is never tried, and the error says what each side has.
    @Test func noCommonTransportIsAClearError() async throws {
        try await withSimulator({ $0.transports = ["LongPolling"] }) { base in
            let connection = HubConnection(
                url: hubURL(base), options: options { $0.transports = [.webSockets, .serverSentEvents] },
                logger: quietLogger())
            do throws(HubConnectionError) {
                try await connection.start()
                Issue.record("started without a common transport")
            } catch {
                #expect(error.kind == .negotiateFailed)
                #expect(
                    error.message.contains("None of the transports supported by the client are supported by the server")
                )
                #expect(error.message.contains("LongPolling"))
            }
        }
    }

    /// A server that requires MessagePack refuses a JSON handshake with ASP.NET Core's text.
    @Test func aRefusedProtocolSaysSo() async throws {
        try await withSimulator({ $0.requireMessagePack = true }) { base in
            let json = HubConnection(url: hubURL(base), options: options(), logger: quietLogger())
            await #expect(throws: HubConnectionError.self) { try await json.start() }
            do throws(HubConnectionError) { try await json.start() } catch {
                #expect(error.message.contains("The protocol 'json' is not supported."))
            }
            let messagePack = HubConnection(
                url: hubURL(base), options: options { $0.hubProtocol = .messagepack }, logger: quietLogger())
            try await messagePack.start()
            await messagePack.stop()
        }
    }

    /// Long Polling: the server ending the connection (204 on the poll) is a lost link, and the reconnect policy brings
    /// a new one; a Close from the server is read from a poll's body.
    @Test func longPollingSeesTheServerEndTheConnection() async throws {
        try await withSimulator({ $0.transports = ["LongPolling"] }) { base in
            let connection = HubConnection(
                url: hubURL(base),
                options: options { $0.reconnectPolicy = DefaultRetryPolicy(delays: [.milliseconds(100)]) },
                logger: quietLogger())
            let events = await connection.events()
            try await connection.start()
            let first = await connection.connectionId
            try await call(base, "POST", "/_sim/drop")
            let back = await waitForEvent(events) { if case .reconnected = $0 { true } else { false } }
            #expect(back != nil)
            #expect(await connection.connectionId != first)
            #expect(await connection.transport == .longPolling)
            await connection.stop()
        }
    }

    /// Long Polling's stop is a DELETE: the server forgets the connection at once.
    @Test func longPollingStopsWithADelete() async throws {
        try await withSimulator({ $0.transports = ["LongPolling"] }) { base in
            let connection = HubConnection(url: hubURL(base), options: options(), logger: quietLogger())
            try await connection.start()
            #expect(try await simStats(base)["connections"] == 1)
            await connection.stop()
            let deadline = ContinuousClock.now + .seconds(5)
            while ContinuousClock.now < deadline, try await simStats(base)["connections"] != 0 {
                try await Task.sleep(for: .milliseconds(20))
            }
            #expect(try await simStats(base)["connections"] == 0)
        }
    }
}

/// Runs `body` while the simulator refuses every WebSocket upgrade but keeps offering WebSockets.
func withSimulatorRefusingUpgrades(_ base: URL, _ body: () async throws -> Void) async throws {
    try await call(base, "POST", "/_sim/upgrades?refuse=true")
    defer { Task { try? await call(base, "POST", "/_sim/upgrades?refuse=false") } }
    try await body()
}

@Suite struct TransportPlanTests {
    func negotiated(_ offers: [(String, [String])]) -> Negotiated {
        Negotiated(
            url: URL(string: "http://h/hub")!, socketId: "t",
            offered: offers.map { .init(transport: $0.0, transferFormats: $0.1) })
    }

    @Test func followsTheClientsOrderAmongWhatIsOffered() {
        let n = negotiated([
            ("LongPolling", ["Text", "Binary"]), ("ServerSentEvents", ["Text"]), ("WebSockets", ["Text", "Binary"]),
        ])
        #expect(
            n.plan(allowed: TransportKind.allCases, format: .text).tries == [
                .webSockets, .serverSentEvents, .longPolling,
            ])
        #expect(n.plan(allowed: [.longPolling, .webSockets], format: .text).tries == [.longPolling, .webSockets])
    }

    @Test func skipsWhatCannotCarryTheFormatOrIsNotOffered() {
        let n = negotiated([
            ("WebSockets", ["Text"]), ("ServerSentEvents", ["Text"]), ("LongPolling", ["Text", "Binary"]),
            ("Carrier", ["Text"]),
        ])
        let (tries, skipped) = n.plan(allowed: TransportKind.allCases, format: .binary)
        #expect(tries == [.longPolling])
        #expect(skipped.contains("'WebSockets' does not support the requested transfer format 'Binary'."))
        #expect(skipped.contains("'ServerSentEvents' does not support the requested transfer format 'Binary'."))
        #expect(skipped.contains("'Carrier' is not a transport this client knows."))
        #expect(negotiated([("LongPolling", ["Text"])]).plan(allowed: [.webSockets], format: .text).tries.isEmpty)
    }

    /// An old server that lists nothing (or negotiation skipped): WebSockets, as before.
    @Test func nothingListedMeansWebSockets() {
        #expect(negotiated([]).plan(allowed: TransportKind.allCases, format: .binary).tries == [.webSockets])
    }

    @Test func httpTransportsKeepTheHTTPScheme() {
        let n = Negotiated(url: URL(string: "https://h/hubs/family?tenant=a")!, socketId: "s+1", accessToken: "tok")
        #expect(
            n.transportURL(.webSockets, tokenInQuery: false).absoluteString == "wss://h/hubs/family?tenant=a&id=s%2B1")
        #expect(
            n.transportURL(.longPolling, tokenInQuery: true).absoluteString
                == "https://h/hubs/family?tenant=a&id=s%2B1&access_token=tok")
    }
}

@Suite struct ServerSentEventParserTests {
    func events(_ chunks: [String]) -> [String] {
        var parser = ServerSentEventParser()
        var out: [String] = []
        for chunk in chunks {
            var bytes = Array(chunk.utf8)
            out += bytes.withUnsafeMutableBytes { parser.feed(UnsafeRawBufferPointer($0)) }.map {
                String(decoding: $0, as: UTF8.self)
            }
        }
        return out
    }

    @Test func eventsEndAtABlankLineWhateverTheLineEnds() {
        #expect(events([":\r\n", "data: one\r\n\r\n", "data: two\n\n", "data: three\r\r"]) == ["one", "two", "three"])
    }

    @Test func dataLinesJoinWithLineFeeds() {
        #expect(events(["data: a\r\ndata: b\r\ndata:c\r\n\r\n"]) == ["a\nb\nc"])
    }

    @Test func commentsAndOtherFieldsAreIgnored() {
        #expect(
            events([": keep-alive\r\n\r\n", "event: x\r\nid: 3\r\nretry: 10\r\ndata: {}\u{1E}\r\n\r\n"]) == ["{}\u{1E}"]
        )
    }

    /// A chunk boundary anywhere, the CR of a CRLF in one chunk and its LF in the next included.
    @Test func anyChunkBoundary() {
        let text = "data: {\"type\":6}\u{1E}{\"type\":6}\u{1E}\r\n\r\ndata: x\r\n\r\n"
        for cut in 1..<text.utf8.count {
            let bytes = Array(text.utf8)
            let parts = [
                String(decoding: bytes[..<cut], as: UTF8.self), String(decoding: bytes[cut...], as: UTF8.self),
            ]
            if parts.joined() == text {
                #expect(events(parts) == ["{\"type\":6}\u{1E}{\"type\":6}\u{1E}", "x"], "cut at \(cut)")
            }
        }
    }
}

/// Back-pressure over the HTTP transports: while the consumer does not take, the connection stops reading (Long
/// Polling makes no poll, Server-Sent Events pause the stream) and the server keeps what it has; nothing is lost
/// and the order holds once the consumer takes again.
@Suite(.serialized, .timeLimit(.minutes(2))) struct SlowConsumerOverHTTPTransportsTests {
    @Test(arguments: [TransportKind.serverSentEvents, .longPolling])
    func aSlowConsumerHoldsTheServerBackAndLosesNothing(_ transport: TransportKind) async throws {
        try await withSimulator { base in
            let connection = HubConnection(
                url: hubURL(base), options: options { $0.transports = [transport] }, logger: quietLogger())
            let buffer = HubEventBuffer<Int>(capacity: 50)
            let decoder = HubEventDecoder<Int>(
                targets: ["TransactionCreated", "BalanceUpdated"],
                decode: { target, arguments in
                    target == "TransactionCreated" ? (try arguments.value(at: 0))["sequence"]?.intValue ?? -1 : 0
                }, onError: { _, _ in })
            await connection.on(decoder, into: buffer)
            try await connection.start()
            // 10,000 events, about 3 MB: more than the transport's own inbox holds (4,096 messages, 1 MiB), so the
            // transport itself stops reading too, not only the route.
            try await call(base, "POST", "/_sim/burst?count=5000")
            let deadline = ContinuousClock.now + .seconds(20)
            while !buffer.isHoldingBackProducer, ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(20))
            }
            #expect(buffer.isHoldingBackProducer, "the connection waits for room instead of reading on")
            var sequences: [Int] = []
            var events = 0
            while events < 10_000, let batch = await buffer.next(limit: 500, within: .seconds(10)) {
                if batch.isEmpty { break }
                events += batch.count
                sequences += batch.filter { $0 > 0 }
            }
            #expect(events == 10_000)
            #expect(sequences == Array(1...5000), "every TransactionCreated, in order")
            await connection.stop()
        }
    }
}
