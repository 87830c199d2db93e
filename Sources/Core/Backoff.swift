/// Exponential back-off with jitter: the one formula of every part that retries (the hub link, each sink, the
/// outbox). Retry n waits `initial * 2^(n-1)`, capped at `maximum`, times a random factor in 1 ± `jitter`, so
/// that many clients of one restarted server do not come back in step.
public struct Backoff: Sendable, Equatable {
    public var initial: Duration
    public var maximum: Duration
    public var jitter: Double

    public init(initial: Duration, maximum: Duration, jitter: Double = 0.2) {
        self.initial = initial
        self.maximum = maximum
        self.jitter = jitter
    }

    /// The wait before retry number `retry` (1: the first after a failure). `random` gives a value in 0...1.
    public func delay(retry: Int, random: () -> Double = { Double.random(in: 0...1) }) -> Duration {
        let base = min(initial * Double(1 << min(max(retry, 1) - 1, 30)), maximum)
        return base * max(0, 1 + jitter * (2 * random() - 1))
    }

    /// As `delay`, in seconds, unless the other side said how long to wait (`Retry-After` and its kin): that wins.
    public func seconds(
        retry: Int, serverAsked: Double? = nil, random: () -> Double = { Double.random(in: 0...1) }
    ) -> Double {
        if let serverAsked { return max(0, serverAsked) }
        return delay(retry: retry, random: random).inSeconds
    }
}
