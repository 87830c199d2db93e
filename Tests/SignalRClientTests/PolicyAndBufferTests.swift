import Foundation
import SignalRProtocol
import TestSupport
import Testing

@testable import SignalRClient

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

@Suite struct RetryPolicyTests {
    private func ctx(_ n: Int) -> RetryContext { RetryContext(previousRetryCount: n, elapsed: .zero, reason: "test") }

    @Test func defaultPolicyIsTheOfficialOne() {
        let p = DefaultRetryPolicy()
        #expect((0..<5).map { p.nextRetryDelay(ctx($0)) } == [.zero, .seconds(2), .seconds(10), .seconds(30), nil])
    }

    @Test func exponentialPolicyGrowsIsCappedJittersAndCanStop() {
        let p = ExponentialRetryPolicy(initial: .seconds(1), maximum: .seconds(60), jitter: 0.2)
        let firsts: [Duration] = (0..<50).map { _ in p.nextRetryDelay(ctx(0))! }
        #expect(
            firsts.allSatisfy { $0 >= Duration.zero && $0 <= Duration.milliseconds(200) },
            "the first retry is almost immediate")
        #expect(
            Set(firsts).count > 1, "and jittered, so that the clients of a restarted server do not come back in step")
        for n in 1...12 {
            let base = min(Double(1 << (n - 1)), 60)
            let d = p.nextRetryDelay(ctx(n))!
            let seconds = Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18
            #expect(seconds >= base * 0.8 - 1e-9 && seconds <= base * 1.2 + 1e-9, "retry \(n): \(seconds) s")
        }
        #expect(ExponentialRetryPolicy(maxAttempts: 3).nextRetryDelay(ctx(3)) == nil)
    }

    /// The policy's jitter is the connection's injected randomness, none of its own: the same source, the same
    /// delays.
    @Test func exponentialPolicyJittersWithTheContextsRandomness() {
        let p = ExponentialRetryPolicy(initial: .seconds(1), maximum: .seconds(60), jitter: 0.2)
        func at(_ n: Int, _ r: Double) -> Duration? {
            p.nextRetryDelay(RetryContext(previousRetryCount: n, elapsed: .zero, reason: "x", random: { r }))
        }
        func seconds(_ d: Duration?) -> Double {
            d.map { Double($0.components.seconds) + Double($0.components.attoseconds) / 1e18 } ?? -1
        }
        #expect(seconds(at(0, 0)) == 0 && abs(seconds(at(0, 1)) - 0.2) < 1e-9)
        #expect(
            abs(seconds(at(3, 0.5)) - 4) < 1e-9 && abs(seconds(at(3, 0)) - 3.2) < 1e-9
                && abs(seconds(at(3, 1)) - 4.8) < 1e-9)
    }

    /// The one back-off of the sinks and the outbox: 2 s, 4 s, 8 s ... capped, the jitter at its two ends, and a
    /// server's Retry-After taking precedence.
    @Test func backoffDoublesToItsCapWithJitterAndGivesWayToTheServer() {
        let b = Backoff(initial: .seconds(2), maximum: .seconds(600))
        #expect(
            (1...11).map { b.delay(retry: $0, random: { 0.5 }) }
                == [2, 4, 8, 16, 32, 64, 128, 256, 512, 600, 600].map { .seconds($0) })
        func seconds(_ d: Duration) -> Double { Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18 }
        #expect(
            abs(seconds(b.delay(retry: 3, random: { 0 })) - 6.4) < 1e-6
                && abs(seconds(b.delay(retry: 3, random: { 1 })) - 9.6) < 1e-6)
        #expect(b.delay(retry: 0, random: { 0.5 }) == .seconds(2), "a retry number below 1 is the first retry")
        #expect(b.seconds(retry: 5, serverAsked: 1800) == 1800 && b.seconds(retry: 5, serverAsked: -3) == 0)
    }
}

@Suite struct StatefulReconnectBufferTests {
    @Test func fullBufferWaitsForAcks() {
        var b = StatefulReconnectBuffer(capacity: 100)
        b.sent(Array(repeating: 0, count: 60))
        #expect(!b.isFull)
        b.sent(Array(repeating: 0, count: 60))
        #expect(b.isFull)
        b.acknowledged(upTo: 1)
        #expect(!b.isFull && b.bufferedBytes == 60)
    }

    @Test func reattachReplaysFromTheFirstUnacknowledged() {
        var b = StatefulReconnectBuffer(capacity: 1000)
        for i in 1...4 { b.sent([UInt8(i)]) }
        b.acknowledged(upTo: 2)
        let (sequenceId, replay) = b.beginReattach()
        #expect(sequenceId == 3)
        #expect(replay == [[3], [4]])
        #expect(b.received() == .ignoredUntilSequence, "nothing counts until the peer's Sequence")
    }

    @Test func duplicatesAfterTheirSequenceAreDropped() throws {
        var b = StatefulReconnectBuffer(capacity: 1000)
        #expect(b.received() == .process)  // 1
        #expect(b.received() == .process)  // 2
        _ = b.beginReattach()
        try b.peerSequence(1)  // the peer replays 1 and 2, then sends 3
        #expect(b.received() == .duplicate)
        #expect(b.received() == .duplicate)
        #expect(b.received() == .process)
        #expect(b.lastReceived == 3)
    }

    @Test func aSequenceBeyondWhatWasReceivedIsAnError() {
        var b = StatefulReconnectBuffer(capacity: 1000)
        _ = b.received()
        #expect(
            throws: HubConnectionError(.protocolError, "Sequence ID greater than amount of messages we've received.")
        ) {
            try b.peerSequence(3)
        }
    }
}

@Suite(.serialized, .timeLimit(.minutes(1))) struct ReconnectGivesUpTests {
    @Test func aReconnectPolicyThatRunsOutEndsInClosedNotInReconnectingForever() async throws {
        try await withSimulator { base in
            let connection = HubConnection(
                url: hubURL(base),
                options: options {
                    $0.reconnectPolicy = DefaultRetryPolicy(delays: [.milliseconds(50), .milliseconds(50)])
                },
                logger: quietLogger())
            let events = await connection.events()
            try await connection.start()
            try await call(base, "POST", "/_sim/refuse?seconds=10")
            let closed = await waitForEvent(events) { if case .closed = $0 { true } else { false } }
            guard case .closed(let error?) = closed else {
                Issue.record("expected a final close, got \(String(describing: closed))")
                return
            }
            #expect(error.message.hasPrefix("Reconnect gave up after 2 attempt(s)"))
            #expect(await connection.state == .disconnected)
        }
    }

    /// The caller gets CancellationError at once, and (as ASP.NET Core 11 allows for a non-streaming invocation) the
    /// server a CancelInvocation for its id; the connection carries on.
    @Test func cancellingAnInvokeEndsItWithoutWaitingForTheServer() async throws {
        try await withSimulator { base in
            let connection = HubConnection(url: hubURL(base), options: options(), logger: quietLogger())
            try await connection.start()
            let hanging = Task { try await connection.invoke("Hang") }
            try await Task.sleep(for: .milliseconds(100))
            hanging.cancel()
            await #expect(throws: CancellationError.self) { try await hanging.value }
            #expect(try await simStat(base, "canceledInvocations", reaching: 1) == 1)
            #expect(try await connection.invoke("Echo", ["still fine"]) == "still fine")
            await connection.stop()
        }
    }
}

/// The simulator's REST side, as the sync engine will use it.
@Suite(.serialized, .timeLimit(.minutes(1))) struct SimulatorRESTTests {
    @Test func loginIssuesATokenThatWorks() async throws {
        try await withSimulator { base in
            let bad = try await call(
                base, "POST", "/api/v1/auth/login", body: #"{"email":"parent@example.com","password":"nope"}"#,
                token: nil)
            #expect(bad["status"] == 401)
            let ok = try await call(
                base, "POST", "/api/v1/auth/login", body: #"{"email":"parent@example.com","password":"allowance"}"#,
                token: nil)
            let token = try #require(ok["token"]?.stringValue)
            #expect(ok["expiresAt"]?.stringValue != nil)
            let children = try await call(base, "GET", "/api/v1/children", token: token)
            #expect(children.arrayValue?.count == 3)
            #expect(try await call(base, "GET", "/api/v1/children", token: "forged")["status"] == 401)
        }
    }

    @Test func idempotencyKeyGivesOneEffect() async throws {
        try await withSimulator { base in
            let body =
                #"{"childId":"22222222-2222-4222-8222-222222222222","amount":1.5,"type":"Debit","description":"Gum"}"#
            var request = URLRequest(url: base.appending(path: "api/v1/transactions"))
            request.httpMethod = "POST"
            request.httpBody = Data(body.utf8)
            request.setValue("Bearer \(testToken)", forHTTPHeaderField: "Authorization")
            request.setValue("key-1", forHTTPHeaderField: "Idempotency-Key")
            let (first, _) = try await TestHTTP.data(for: request)
            let (second, _) = try await TestHTTP.data(for: request)
            #expect(try JSONValue(parsing: first)["id"] == JSONValue(parsing: second)["id"])
            let child = try await call(base, "GET", "/api/v1/children/22222222-2222-4222-8222-222222222222")
            #expect(child["currentBalance"] == .number("10.5"), "12.00 - 1.50 once, not twice")
        }
    }

    @Test(arguments: [
        (#"{"childId":"x","amount":1,"type":"Credit","description":"d"}"#, "childId is required and must be a UUID."),
        (
            #"{"childId":"11111111-1111-4111-8111-111111111111","amount":"1","type":"Credit","description":"d"}"#,
            "amount is required and must be a JSON number."
        ),
        (
            #"{"childId":"11111111-1111-4111-8111-111111111111","amount":1.234,"type":"Credit","description":"d"}"#,
            "amount has more than 2 decimal places."
        ),
        (
            #"{"childId":"11111111-1111-4111-8111-111111111111","amount":1,"type":"Refund","description":"d"}"#,
            "type must be \"Credit\" or \"Debit\"."
        ),
        (
            #"{"childId":"11111111-1111-4111-8111-111111111111","amount":1000,"type":"Debit","description":"d"}"#,
            "Insufficient funds: balance 25.5, debit 1000."
        ),
    ])
    func invalidTransactionsGetAClear400(_ body: String, _ message: String) async throws {
        try await withSimulator { base in
            let answer = try await call(base, "POST", "/api/v1/transactions", body: body)
            #expect(answer["status"] == 400)
            #expect(answer["error"]?.stringValue == message)
        }
    }

    @Test func theCursorPagesOldestFirstWithoutGapsOrRepeats() async throws {
        try await withSimulator { base in
            for i in 1...7 {
                try await call(
                    base, "POST", "/api/v1/transactions",
                    body:
                        #"{"childId":"11111111-1111-4111-8111-111111111111","amount":1,"type":"Credit","description":"t\#(i)"}"#
                )
            }
            var cursor = "0"
            var seen: [String] = []
            while true {
                let page = try await call(
                    base, "GET",
                    "/api/v1/children/11111111-1111-4111-8111-111111111111/transactions?after=\(cursor)&limit=3")
                let items = page["items"]?.arrayValue ?? []
                if items.isEmpty { break }
                seen += items.compactMap { $0["description"]?.stringValue }
                cursor = page["nextCursor"]?.stringValue ?? cursor
            }
            #expect(seen == (1...7).map { "t\($0)" })
            let newest = try await call(
                base, "GET", "/api/v1/children/11111111-1111-4111-8111-111111111111/transactions?limit=2")
            #expect(newest.arrayValue?.compactMap { $0["description"]?.stringValue } == ["t7", "t6"])
        }
    }
}
