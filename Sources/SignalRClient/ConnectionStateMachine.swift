import Core
import Logging

/// The life of a `HubConnection` as a value: each thing that happens (start, an attempt that worked or failed, a
/// link that ended, stop) is an input, and the answer is what the connection must do (try again after a pause,
/// re-attach or connect anew, tell its subscribers, log, give up). No I/O, no clock of its own: tests drive it
/// without sockets (`ConnectionStateMachineTests`), and the actor only carries the actions out.
///
/// One retry loop serves the first start, reconnects and stateful re-attaches alike: `Action.attempt` says which.
struct ConnectionStateMachine {
    enum Mode: Equatable, Sendable {
        /// Negotiate, WebSocket and handshake: a new connection id.
        case newConnection
        /// The same connection id again (stateful reconnect), pending invocations kept.
        case reattach
    }

    enum State: Equatable {
        case disconnected
        case starting(attempt: Int, began: ContinuousClock.Instant)
        case connected(since: ContinuousClock.Instant)
        case reconnecting(Mode, attempt: Int, began: ContinuousClock.Instant, reason: HubConnectionError)
        case disconnecting
    }

    enum Action: Equatable {
        /// Wait `after`, then make the attempt.
        case attempt(Mode, after: Duration)
        /// Subscribers hear `connected`/`reconnected` with the connection id (the actor knows it).
        case announceConnected(reconnected: Bool)
        case announce(HubConnectionEvent)
        /// Forget the logical connection: pending invocations fail, sequencing ends.
        case forgetConnection
        /// `start()` throws this.
        case failStart(HubConnectionError)
        case log(Logger.Level, String, reason: String? = nil)
    }

    struct Policies {
        var start: (any RetryPolicy)?
        var reconnect: (any RetryPolicy)?
        /// A link that lived less than this is a short link: the next reconnect waits longer.
        var stableLinkAfter: Duration
        var shortLinkBackoff: (initial: Duration, maximum: Duration)
        /// A value in 0...1 for the jitter (fixed in tests).
        var random: @Sendable () -> Double = { Double.random(in: 0...1) }
        /// A ping goes when nothing was sent for this long (the official clients' 15 s).
        var keepAliveInterval: Duration = .seconds(15)
        /// The link is given up when nothing was received for this long (the official clients' 30 s).
        var serverTimeout: Duration = .seconds(30)
    }

    /// What the keep-alive does at one look at a live link.
    enum KeepAliveStep: Equatable {
        /// Nothing received for the server timeout: the link is ended.
        case serverTimedOut
        /// Nothing sent for the interval: a ping now, and the next look at `next`.
        case ping(next: ContinuousClock.Instant)
        /// Nothing to do before `until`.
        case wait(until: ContinuousClock.Instant)
    }

    /// The keep-alive and the server timeout, decided from when the link last sent and received. While the
    /// connection holds the server back (a full event buffer: it is not reading), silence is ours, not the
    /// server's, and does not count.
    func keepAlive(
        at now: ContinuousClock.Instant, lastSend: ContinuousClock.Instant, lastReceive: ContinuousClock.Instant,
        heldBack: Bool
    ) -> KeepAliveStep {
        if !heldBack && now - lastReceive >= policies.serverTimeout { return .serverTimedOut }
        let ping = now - lastSend >= policies.keepAliveInterval
        let next = min(
            (ping ? now : lastSend) + policies.keepAliveInterval,
            (heldBack ? now : lastReceive) + policies.serverTimeout)
        return ping ? .ping(next: next) : .wait(until: next)
    }

    private(set) var state = State.disconnected
    let policies: Policies
    /// Links in a row that ended soon after they were made.
    private(set) var shortLinks = 0
    private var lastLossReason: String?
    /// From this many short links on, the cycle is said once and its lines go to debug level.
    static let shortLinksToWarn = 3

    init(policies: Policies) { self.policies = policies }

    /// What the actor's public `state` says.
    var phase: HubConnectionState {
        switch state {
        case .disconnected: .disconnected
        case .starting: .connecting
        case .connected: .connected
        case .reconnecting: .reconnecting
        case .disconnecting: .disconnecting
        }
    }

    /// Whether an attempt the actor is about to make (after its pause) is still wanted.
    var isAttempting: Bool {
        switch state {
        case .starting, .reconnecting: true
        default: false
        }
    }

    // MARK: - Inputs

    mutating func start(at now: ContinuousClock.Instant) -> [Action] {
        guard state == .disconnected else { return [] }
        state = .starting(attempt: 0, began: now)
        return [.attempt(.newConnection, after: .zero)]
    }

    mutating func attemptSucceeded(at now: ContinuousClock.Instant) -> [Action] {
        switch state {
        case .starting:
            state = .connected(since: now)
            return [.announceConnected(reconnected: false)]
        case .reconnecting(let mode, let attempt, _, _):
            state = .connected(since: now)
            let line = mode == .reattach ? "re-attached" : "reconnected"
            return [
                .log(mode == .newConnection && cycling ? .debug : .info, "\(line) (attempt \(attempt))"),
                .announceConnected(reconnected: true),
            ]
        default:
            return []
        }
    }

    mutating func attemptFailed(_ error: HubConnectionError, at now: ContinuousClock.Instant) -> [Action] {
        switch state {
        case .starting(let attempt, let began):
            let context = RetryContext(
                previousRetryCount: attempt, elapsed: now - began, reason: error.message, random: policies.random)
            guard error.kind != .unauthorized, let delay = policies.start?.nextRetryDelay(context) else {
                state = .disconnected
                return [.failStart(error)]
            }
            state = .starting(attempt: attempt + 1, began: began)
            return [
                .log(.warning, "start failed; retrying in \(spoken(delay))", reason: error.message),
                .attempt(.newConnection, after: delay),
            ]
        case .reconnecting(.reattach, let attempt, let began, _):
            // The server no longer knows the connection (or refuses it): a new one, at once.
            if case .transport(.upgradeRejected) = error.kind { return fallBackToNewConnection(error, at: now) }
            if error.kind == .handshakeFailed || error.kind == .unauthorized {
                return fallBackToNewConnection(error, at: now)
            }
            let policy = policies.reconnect ?? DefaultRetryPolicy()
            let context = RetryContext(
                previousRetryCount: attempt, elapsed: now - began, reason: error.message, random: policies.random)
            guard let delay = policy.nextRetryDelay(context) else { return fallBackToNewConnection(error, at: now) }
            state = .reconnecting(.reattach, attempt: attempt + 1, began: began, reason: error)
            return [
                .log(.warning, "re-attach attempt \(attempt) failed: \(error.message)"),
                .attempt(.reattach, after: delay),
            ]
        case .reconnecting(.newConnection, let attempt, let began, _):
            // A token refused at a reconnect (the token source had its fresh try) ends the connection as it ends a
            // start: the same token will not help, and a daemon should say so rather than knock forever.
            if error.kind == .unauthorized {
                state = .disconnected
                return [
                    .log(.error, "the hub refused the token at a reconnect: \(error.message)"),
                    .announce(.closed(error: error)),
                ]
            }
            state = .reconnecting(.newConnection, attempt: attempt, began: began, reason: error)
            return [.log(.warning, "reconnect attempt \(attempt) failed: \(error.message)")] + nextReconnect(at: now)
        default:
            return []
        }
    }

    /// The link ended: with `error` nil after our own close. `stateful`: the connection can be re-attached.
    mutating func linkEnded(_ error: HubConnectionError?, stateful: Bool, at now: ContinuousClock.Instant) -> [Action] {
        guard case .connected(let since) = state else {
            if state == .disconnecting {
                state = .disconnected
                return [.forgetConnection, .announce(.closed(error: nil))]
            }
            return []
        }
        var actions = countShortLink(lived: now - since, reason: error?.message ?? "closed")
        if stateful, let error, error.isLinkLoss {
            actions.append(
                .log(
                    quiet(error.message) ? .debug : .warning, "connection lost; re-attaching (stateful reconnect)",
                    reason: error.message))
            state = .reconnecting(.reattach, attempt: 1, began: now, reason: error)
            let first =
                (policies.reconnect ?? DefaultRetryPolicy()).nextRetryDelay(
                    .init(previousRetryCount: 0, elapsed: .zero, reason: error.message)) ?? .zero
            return actions + [
                .announce(.reconnecting(reason: error.message)), .attempt(.reattach, after: shortLinkPause(first)),
            ]
        }
        actions.append(.forgetConnection)
        let canReconnect: Bool
        if case .closedByServer(let allow) = error?.kind { canReconnect = allow } else { canReconnect = true }
        guard let error, canReconnect, policies.reconnect != nil else {
            state = .disconnected
            if let error { actions.append(.log(.error, "connection closed: \(error.message)")) }
            return actions + [.announce(.closed(error: error))]
        }
        actions.append(
            .log(quiet(error.message) ? .debug : .warning, "connection lost; reconnecting", reason: error.message))
        state = .reconnecting(.newConnection, attempt: 0, began: now, reason: error)
        return actions + [.announce(.reconnecting(reason: error.message))] + nextReconnect(at: now)
    }

    /// `stop()`: with a live link the actor closes it and `linkEnded` follows; otherwise it is over now.
    mutating func stop() -> [Action] {
        switch state {
        case .disconnected, .disconnecting:
            return []
        case .connected:
            state = .disconnecting
            return []
        case .starting:
            state = .disconnected
            return [.failStart(HubConnectionError(.stopped, "The connection was stopped while starting."))]
        case .reconnecting:
            state = .disconnected
            return [.forgetConnection, .announce(.closed(error: nil))]
        }
    }

    // MARK: - Decisions

    private mutating func fallBackToNewConnection(
        _ reason: HubConnectionError, at now: ContinuousClock.Instant
    ) -> [Action] {
        var actions: [Action] = [
            .log(.warning, "re-attach failed; starting a new connection", reason: reason.message), .forgetConnection,
        ]
        guard policies.reconnect != nil else {
            state = .disconnected
            return actions + [.announce(.closed(error: reason))]
        }
        state = .reconnecting(.newConnection, attempt: 0, began: now, reason: reason)
        actions += nextReconnect(at: now)
        return actions
    }

    /// The next attempt of a reconnect, or the end when the policy gives up.
    private mutating func nextReconnect(at now: ContinuousClock.Instant) -> [Action] {
        guard case .reconnecting(.newConnection, let attempt, let began, let reason) = state else { return [] }
        let context = RetryContext(
            previousRetryCount: attempt, elapsed: now - began, reason: reason.message, random: policies.random)
        guard let policy = policies.reconnect, let delay = policy.nextRetryDelay(context) else {
            state = .disconnected
            return [
                .announce(
                    .closed(
                        error: HubConnectionError(
                            reason.kind, "Reconnect gave up after \(attempt) attempt(s): \(reason.message)")))
            ]
        }
        state = .reconnecting(.newConnection, attempt: attempt + 1, began: began, reason: reason)
        return [.attempt(.newConnection, after: attempt == 0 ? shortLinkPause(delay) : delay)]
    }

    /// Counts links that ended soon after they were made; a link that lasted resets the count.
    private mutating func countShortLink(lived: Duration, reason: String) -> [Action] {
        guard lived < policies.stableLinkAfter else {
            defer { shortLinks = 0 }
            guard cycling else { return [] }
            return [
                .log(
                    .notice,
                    "the hub link held for \(lived.formatted(.units(allowed: [.seconds]))); reconnecting as usual again"
                )
            ]
        }
        shortLinks += 1
        guard shortLinks == Self.shortLinksToWarn else { return [] }
        let within = policies.stableLinkAfter.formatted(.units(allowed: [.seconds]))
        let upTo = policies.shortLinkBackoff.maximum.formatted(.units(allowed: [.seconds]))
        return [
            .log(
                .warning,
                "the hub keeps ending the link soon after it is made (\(shortLinks) times in a row, each within \(within); last: \(reason)); reconnecting with a growing pause, up to \(upTo), until a link holds"
            )
        ]
    }

    /// Whether the hub is ending links as fast as they are made (then each round is logged at debug level).
    private var cycling: Bool { shortLinks >= Self.shortLinksToWarn }

    /// Whether a lost link is only the cycle going on (said already): the same reason again while cycling.
    private mutating func quiet(_ reason: String) -> Bool {
        defer { lastLossReason = reason }
        return cycling && reason == lastLossReason
    }

    /// The pause before the first attempt after a loss: the policy's, and after short links at least the growing
    /// short-link pause, jittered.
    private func shortLinkPause(_ policy: Duration) -> Duration {
        guard shortLinks > 0 else { return policy }
        let (initial, maximum) = policies.shortLinkBackoff
        return max(
            policy, Backoff(initial: initial, maximum: maximum).delay(retry: shortLinks, random: policies.random))
    }
}
