/// What a retry policy is told before each new attempt.
public struct RetryContext: Sendable {
    /// Attempts made so far in this round of retries (0 before the first retry).
    public var previousRetryCount: Int
    /// Time since this round of retries began.
    public var elapsed: Duration
    /// Why the last attempt (or the connection) failed.
    public var reason: String
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

/// For daemons: retry forever (or up to `maxAttempts`), exponential from `initial`, capped at `maximum`,
/// with ±`jitter` so that many clients do not come back in step (the first retry within `initial * jitter`).
public struct ExponentialRetryPolicy: RetryPolicy {
    public var initial: Duration
    public var maximum: Duration
    public var jitter: Double
    public var maxAttempts: Int?

    public init(initial: Duration = .seconds(1), maximum: Duration = .seconds(60), jitter: Double = 0.2, maxAttempts: Int? = nil) {
        self.initial = initial
        self.maximum = maximum
        self.jitter = jitter
        self.maxAttempts = maxAttempts
    }

    public func nextRetryDelay(_ context: RetryContext) -> Duration? {
        if let maxAttempts, context.previousRetryCount >= maxAttempts { return nil }
        // At once, but not all clients of a restarted server in the same instant.
        if context.previousRetryCount == 0 { return initial * Double.random(in: 0...jitter) }
        let base = initial * Double(1 << min(context.previousRetryCount - 1, 30))
        let capped = min(base, maximum)
        let factor = 1 + Double.random(in: -jitter...jitter)
        return capped * max(0, factor)
    }
}
