import Foundation

/// A sink that fails, as its worker records it in the ledger: what `status`, `deliveries list` and `/healthz` show,
/// on every replica and in every process. A sink that works has none.
public struct SinkHealth: Sendable, Equatable {
    /// The first failed send since the last one that went through.
    public var failingSince: Date
    /// The last failure, as the worker logged it.
    public var lastError: String
    /// The last failure was a refusal (a dead letter): a retry alone will not get the alerts through.
    public var deadLettering: Bool

    public init(failingSince: Date, lastError: String, deadLettering: Bool) {
        self.failingSince = failingSince
        self.lastError = lastError
        self.deadLettering = deadLettering
    }

    /// Why `/healthz` calls the relay unhealthy for this sink, if it does: a sink that dead-letters at once, one that
    /// fails (a retry may still get through) once it has failed for `after`.
    public func unhealthyReason(sink: String, at now: Date, after: TimeInterval) -> String? {
        let since = Date.ISO8601FormatStyle().format(failingSince)
        if deadLettering { return "sink \(sink) dead-letters since \(since): \(lastError)" }
        guard now.timeIntervalSince(failingSince) >= after else { return nil }
        return "sink \(sink) failing since \(since): \(lastError)"
    }
}
