/// What a retry policy is told before each new attempt.
public struct RetryContext: Sendable {
    /// Attempts made so far in this round of retries (0 before the first retry).
    public var previousRetryCount: Int
    /// Time since this round of retries began.
    public var elapsed: Duration
    /// Why the last attempt (or the connection) failed.
    public var reason: String
    /// A value in 0...1 for a policy's jitter: the connection's own source (tests inject theirs), so that no policy
    /// draws randomness of its own.
    public var random: @Sendable () -> Double

    public init(
        previousRetryCount: Int, elapsed: Duration, reason: String,
        random: @escaping @Sendable () -> Double = { Double.random(in: 0...1) }
    ) {
        self.previousRetryCount = previousRetryCount
        self.elapsed = elapsed
        self.reason = reason
        self.random = random
    }
}

/// Decides how long to wait before the next attempt; nil gives up.
public protocol RetryPolicy: Sendable {
    func nextRetryDelay(_ context: RetryContext) -> Duration?
}

/// The official clients' default: retry after 0, 2, 10 and 30 seconds, then give up.
public struct DefaultRetryPolicy: RetryPolicy {
    public let delays: [Duration]

    public init(delays: [Duration] = [.zero, .seconds(2), .seconds(10), .seconds(30)]) { self.delays = delays }

    public func nextRetryDelay(_ context: RetryContext) -> Duration? {
        context.previousRetryCount < delays.count ? delays[context.previousRetryCount] : nil
    }
}

/// For daemons: retry forever (or up to `maxAttempts`) on a `Backoff` from `initial` to `maximum`; the first
/// retry comes at once, within `initial * jitter` (not every client of a restarted server in the same instant).
public struct ExponentialRetryPolicy: RetryPolicy {
    public var backoff: Backoff
    public var maxAttempts: Int?

    public init(
        initial: Duration = .seconds(1), maximum: Duration = .seconds(60), jitter: Double = 0.2, maxAttempts: Int? = nil
    ) {
        backoff = Backoff(initial: initial, maximum: maximum, jitter: jitter)
        self.maxAttempts = maxAttempts
    }

    public func nextRetryDelay(_ context: RetryContext) -> Duration? {
        if let maxAttempts, context.previousRetryCount >= maxAttempts { return nil }
        if context.previousRetryCount == 0 { return backoff.initial * (backoff.jitter * context.random()) }
        return backoff.delay(retry: context.previousRetryCount, random: context.random)
    }
}
