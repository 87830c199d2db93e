import Testing

@testable import SignalRClient

/// The connection's life driven without sockets: each input and the actions it must lead to.
@Suite struct ConnectionStateMachineTests {
    typealias Machine = ConnectionStateMachine
    let t0 = ContinuousClock.now

    func machine(start: (any RetryPolicy)? = nil, reconnect: (any RetryPolicy)? = DefaultRetryPolicy()) -> Machine {
        Machine(
            policies: .init(
                start: start, reconnect: reconnect, stableLinkAfter: .seconds(30),
                shortLinkBackoff: (.milliseconds(500), .seconds(60)),
                random: { 0.5 }))  // no jitter
    }

    func connected(_ m: inout Machine, at: ContinuousClock.Instant? = nil) {
        _ = m.start(at: at ?? t0)
        _ = m.attemptSucceeded(at: at ?? t0)
    }

    let lost = HubConnectionError(.transport(.connectionLost), "The connection to the hub was lost.")
    let timeout = HubConnectionError(
        .serverTimeout, "Server timeout elapsed without receiving a message from the server.")

    func attempts(_ actions: [Machine.Action]) -> [Machine.Action] {
        actions.filter { if case .attempt = $0 { true } else { false } }
    }

    func announcements(_ actions: [Machine.Action]) -> [HubConnectionEvent] {
        actions.compactMap { if case .announce(let e) = $0 { e } else { nil } }
    }

    @Test func startMakesOneAttemptAndAnnouncesTheConnection() {
        var m = machine()
        #expect(m.start(at: t0) == [.attempt(.newConnection, after: .zero)])
        #expect(m.phase == .connecting)
        #expect(m.start(at: t0) == [], "a second start while starting does nothing")
        #expect(m.attemptSucceeded(at: t0) == [.announceConnected(reconnected: false)])
        #expect(m.phase == .connected)
    }

    @Test func aFailedStartWithoutAStartPolicyFailsAndARefusedTokenIsNotRetried() {
        var m = machine()
        _ = m.start(at: t0)
        let handshake = HubConnectionError(.handshakeFailed, "The server refused the handshake: nope")
        #expect(m.attemptFailed(handshake, at: t0) == [.failStart(handshake)])
        #expect(m.phase == .disconnected)

        var retrying = machine(start: DefaultRetryPolicy(delays: [.seconds(1)]))
        _ = retrying.start(at: t0)
        #expect(attempts(retrying.attemptFailed(lost, at: t0)) == [.attempt(.newConnection, after: .seconds(1))])
        #expect(retrying.attemptFailed(lost, at: t0) == [.failStart(lost)], "the policy gave up")

        var refused = machine(start: DefaultRetryPolicy())
        _ = refused.start(at: t0)
        let unauthorized = HubConnectionError(.unauthorized, "401")
        #expect(
            refused.attemptFailed(unauthorized, at: t0) == [.failStart(unauthorized)], "the same token will not help")
    }

    /// A refused token ends the connection at a reconnect as it ends a start: the daemon exits
    /// 77 either way instead of knocking forever with a token the hub refuses. A re-attach refused goes to a new
    /// connection first (its token is fetched fresh).
    @Test func aTokenRefusedAtAReconnectEndsTheConnectionAsAtStart() {
        let unauthorized = HubConnectionError(.unauthorized, "The hub refused the token (HTTP 401).")
        var m = machine(reconnect: DefaultRetryPolicy(delays: [.zero, .seconds(2), .seconds(10)]))
        connected(&m)
        _ = m.linkEnded(lost, stateful: false, at: t0 + .seconds(60))
        let refused = m.attemptFailed(unauthorized, at: t0 + .seconds(61))
        #expect(announcements(refused) == [.closed(error: unauthorized)])
        #expect(attempts(refused).isEmpty, "no further attempt with a token the hub refuses")
        #expect(m.phase == .disconnected)

        var stateful = machine()
        connected(&stateful)
        _ = stateful.linkEnded(lost, stateful: true, at: t0 + .seconds(60))
        let reattachRefused = stateful.attemptFailed(unauthorized, at: t0 + .seconds(61))
        #expect(
            attempts(reattachRefused) == [.attempt(.newConnection, after: .zero)],
            "a new connection, with a fresh token")
        #expect(
            announcements(stateful.attemptFailed(unauthorized, at: t0 + .seconds(62))) == [.closed(error: unauthorized)]
        )
        #expect(stateful.phase == .disconnected)
    }

    @Test func aCloseWithoutAllowReconnectEndsTheConnection() {
        var m = machine()
        connected(&m)
        let close = HubConnectionError(.closedByServer(allowReconnect: false), "Server returned an error on close: bye")
        let actions = m.linkEnded(close, stateful: false, at: t0 + .seconds(60))
        #expect(actions.contains(.forgetConnection))
        #expect(announcements(actions) == [.closed(error: close)])
        #expect(attempts(actions).isEmpty)
        #expect(m.phase == .disconnected)
    }

    @Test func aCloseWithAllowReconnectOrATimeoutReconnectsOnAPolicySchedule() {
        for error in [
            HubConnectionError(.closedByServer(allowReconnect: true), "The server closed the connection."), timeout,
        ] {
            var m = machine(reconnect: DefaultRetryPolicy(delays: [.zero, .seconds(2)]))
            connected(&m)
            let actions = m.linkEnded(error, stateful: false, at: t0 + .seconds(60))
            #expect(announcements(actions) == [.reconnecting(reason: error.message)])
            #expect(attempts(actions) == [.attempt(.newConnection, after: .zero)])
            #expect(m.phase == .reconnecting)
            #expect(
                attempts(m.attemptFailed(lost, at: t0 + .seconds(61))) == [.attempt(.newConnection, after: .seconds(2))]
            )
            let gaveUp = m.attemptFailed(lost, at: t0 + .seconds(63))
            #expect(
                announcements(gaveUp) == [
                    .closed(
                        error: HubConnectionError(lost.kind, "Reconnect gave up after 2 attempt(s): \(lost.message)"))
                ])
            #expect(m.phase == .disconnected)
        }
    }

    @Test func withStatefulReconnectALostLinkIsReattachedAndAForgottenOneStartsAnew() {
        var m = machine()
        connected(&m)
        let actions = m.linkEnded(lost, stateful: true, at: t0 + .seconds(60))
        #expect(!actions.contains(.forgetConnection), "pending invocations survive a re-attach")
        #expect(attempts(actions) == [.attempt(.reattach, after: .zero)])
        // A transient failure: re-attach again.
        #expect(attempts(m.attemptFailed(lost, at: t0 + .seconds(61))) == [.attempt(.reattach, after: .seconds(2))])
        // The server forgot the connection (404 on the upgrade): a new one, at once.
        let forgotten = HubConnectionError(.transport(.upgradeRejected(status: 404)), "404")
        let fallBack = m.attemptFailed(forgotten, at: t0 + .seconds(63))
        #expect(fallBack.contains(.forgetConnection))
        #expect(attempts(fallBack) == [.attempt(.newConnection, after: .zero)])
        #expect(m.attemptSucceeded(at: t0 + .seconds(63)).contains(.announceConnected(reconnected: true)))
    }

    @Test func linksThatEndAtOnceAreSaidOnceAndWaitLonger() {
        var m = machine(reconnect: DefaultRetryPolicy(delays: Array(repeating: .zero, count: 10)))
        connected(&m)
        var now = t0
        var pauses: [Duration] = []
        var warnings = 0
        for _ in 0..<5 {
            now += .milliseconds(100)  // each link lives 100 ms
            let actions = m.linkEnded(lost, stateful: false, at: now)
            warnings +=
                actions.filter {
                    if case .log(.warning, let text, _) = $0, text.contains("keeps ending the link") {
                        true
                    } else {
                        false
                    }
                }.count
            for case .attempt(_, let pause) in actions { pauses.append(pause) }
            _ = m.attemptSucceeded(at: now)
        }
        #expect(
            pauses == [.milliseconds(500), .seconds(1), .seconds(2), .seconds(4), .seconds(8)],
            "a growing pause, not a storm")
        #expect(warnings == 1, "the series is said once")
        let quietLoss = m.linkEnded(lost, stateful: false, at: now + .milliseconds(100))
        #expect(
            quietLoss.contains(.log(.debug, "connection lost; reconnecting", reason: lost.message)),
            "the same loss again: debug")
        _ = m.attemptSucceeded(at: now)
        // A link that holds brings quick reconnects back.
        let held = m.linkEnded(lost, stateful: false, at: now + .seconds(40))
        #expect(attempts(held) == [.attempt(.newConnection, after: .zero)])
        #expect(m.shortLinks == 0)
    }

    @Test func stopEndsARetryAndAStartAndClosesALiveLinkThroughItsEnd() {
        var reconnecting = machine()
        connected(&reconnecting)
        _ = reconnecting.linkEnded(lost, stateful: false, at: t0 + .seconds(60))
        #expect(announcements(reconnecting.stop()) == [.closed(error: nil)])
        #expect(!reconnecting.isAttempting, "the retry in progress stops")

        var starting = machine(start: DefaultRetryPolicy())
        _ = starting.start(at: t0)
        #expect(
            starting.stop() == [.failStart(HubConnectionError(.stopped, "The connection was stopped while starting."))])

        var live = machine()
        connected(&live)
        #expect(live.stop() == [])
        #expect(live.phase == .disconnecting)
        let end = live.linkEnded(nil, stateful: false, at: t0 + .seconds(1))
        #expect(announcements(end) == [.closed(error: nil)])
        #expect(attempts(end).isEmpty)
        #expect(live.phase == .disconnected)
    }

    /// Keep-alive and server timeout, decided without a socket: a ping after 15 s of our silence, the link given up
    /// after 30 s of the server's, and no timeout while we hold the server back (our silence, not its).
    @Test func theKeepAlivePingsOnOurSilenceAndTimesOutOnTheServers() {
        let m = machine()
        let t0 = ContinuousClock.now
        #expect(
            m.keepAlive(at: t0 + .seconds(5), lastSend: t0, lastReceive: t0, heldBack: false)
                == .wait(until: t0 + .seconds(15)))
        #expect(
            m.keepAlive(at: t0 + .seconds(15), lastSend: t0, lastReceive: t0 + .seconds(10), heldBack: false)
                == .ping(next: t0 + .seconds(30)))
        #expect(
            m.keepAlive(at: t0 + .seconds(29), lastSend: t0 + .seconds(28), lastReceive: t0, heldBack: false)
                == .wait(until: t0 + .seconds(30)), "the timeout comes before the next ping")
        #expect(
            m.keepAlive(at: t0 + .seconds(30), lastSend: t0 + .seconds(28), lastReceive: t0, heldBack: false)
                == .serverTimedOut)
        #expect(
            m.keepAlive(at: t0 + .seconds(45), lastSend: t0 + .seconds(40), lastReceive: t0, heldBack: true)
                == .wait(until: t0 + .seconds(55)), "held back: no timeout, the next ping as usual")
    }
}
