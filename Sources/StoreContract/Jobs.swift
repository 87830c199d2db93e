import Foundation

/// How one attempt at a queued job ended, as every queue records it.
public enum JobOutcome: Sendable, Equatable {
    /// Done: the write reached the server, the alert the sink.
    case done(at: Date)
    /// Pending again, due at `at`.
    case retry(error: String, at: Date)
    /// Given up (a dead letter, or `rejected` for a refusal the other side made for good), with the reason.
    case gaveUp(reason: String)
}

/// The states of a queued job, stored as their raw values. Each queue names its own (`OutboxEntry.State`,
/// `Delivery.State`) and says which of them the queue's machine means.
public protocol JobState: RawRepresentable<String>, CaseIterable, Sendable, Equatable {
    /// Owed, waiting until it falls due.
    static var pending: Self { get }
    /// Being attempted, for a queue that records it (the outbox); a crash leaves it to be requeued.
    static var inFlight: Self { get }
    /// The other side has it.
    static var done: Self { get }
    /// Given up after too many attempts or too long: a dead letter, kept until retried or pruned.
    static var dead: Self { get }
}

extension JobState {
    /// The states a job is still owed in.
    public static var waiting: [Self] { [.pending, .inFlight] }
    /// `waiting` as an SQL list, `('pending', 'in_flight')`: written from the enum, so that no backend's query
    /// spells it.
    public static var waitingSQL: String { sqlList(waiting) }
    /// `states` as an SQL list, written from the enum.
    public static func sqlList(_ states: [Self]) -> String {
        "(" + states.map { "'\($0.rawValue)'" }.joined(separator: ", ") + ")"
    }
}

extension Delivery.State: JobState {
    public static var done: Self { .delivered }
}

extension OutboxEntry.State: JobState {
    public static var done: Self { .sent }
}
