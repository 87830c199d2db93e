import Foundation
import GRDB

/// How one attempt at a queued job ended, as every queue records it.
public enum JobOutcome: Sendable, Equatable {
    /// Done: the write reached the server, the alert the sink.
    case done(at: Date)
    /// Pending again, due at `at`.
    case retry(error: String, at: Date)
    /// Given up (a dead letter, or `rejected` for a refusal the other side made for good), with the reason.
    case gaveUp(reason: String)
}

/// The one durable-queue machine of the store, shared by the outbox (writes waiting for the server) and the
/// delivery ledger (alerts owed to sinks): a job is pending until it falls due, is taken without a write (a crash
/// during its attempt leaves it pending; the retry carries the same idempotency key or `webhook-id`), and its
/// outcome is recorded as done, a retry at a time, or given up. The tables keep their own columns and their own
/// names for the states (`outbox.State`, `Delivery.State`); what a queue does is written once, here.
struct WorkQueue: Sendable {
    /// The table and its key column.
    let table: String
    let key: String
    /// What `done` and `gaveUp` are called in this table.
    let doneState: String
    let deadState: String
    /// Where the time a job was done is kept, if the table keeps it.
    let doneAtColumn: String?

    static let outbox = WorkQueue(table: "outbox", key: "seq", doneState: "sent", deadState: "dead", doneAtColumn: nil)
    static let delivery = WorkQueue(table: "delivery", key: "id", doneState: "delivered", deadState: "dead", doneAtColumn: "delivered_at")

    /// States a job is still owed in (`in_flight`: written by versions that marked a job before its attempt).
    static let waiting = "('pending', 'in_flight')"

    /// Records the outcome of one attempt: the attempt is counted (unless `attempted` is false: given up before
    /// one was made), the state and error set. `gaveUpAs` names another final state than the table's dead letter
    /// (the outbox's `rejected`).
    func record(
        _ db: Database, _ key: some DatabaseValueConvertible, _ outcome: JobOutcome, attempted: Bool = true, gaveUpAs: String? = nil
    ) throws {
        let count = attempted ? "attempts = attempts + 1" : "attempts = attempts"
        switch outcome {
        case .done(let at):
            let stamp = doneAtColumn.map { ", \($0) = ?" } ?? ""
            try db.executeCached(
                sql: "UPDATE \(table) SET state = '\(doneState)', \(count), last_error = NULL\(stamp) WHERE \(self.key) = ?",
                arguments: doneAtColumn == nil ? [key] : [ISO.string(at), key])
        case .retry(let error, let at):
            try db.executeCached(
                sql: "UPDATE \(table) SET state = 'pending', \(count), last_error = ?, next_attempt_at = ? WHERE \(self.key) = ?",
                arguments: [error, ISO.string(at), key])
        case .gaveUp(let reason):
            try db.execute(
                sql: "UPDATE \(table) SET state = ?, \(count), last_error = ? WHERE \(self.key) = ?",
                arguments: [gaveUpAs ?? deadState, reason, key])
        }
    }

    /// Marks a job as being attempted, for a queue whose readers must know that it may have reached the other side
    /// (the outbox: the hub can echo a write before its POST is answered, and the echo is matched to it). The
    /// attempt is counted with its outcome; a crash leaves the job `in_flight` until `requeueInFlight`.
    func markInFlight(_ db: Database, _ key: some DatabaseValueConvertible) throws {
        try db.execute(sql: "UPDATE \(table) SET state = 'in_flight' WHERE \(self.key) = ?", arguments: [key])
    }

    /// Jobs left `in_flight` by a crash: pending again.
    func requeueInFlight(_ db: Database) throws -> Int {
        try db.execute(sql: "UPDATE \(table) SET state = 'pending' WHERE state = 'in_flight'")
        return db.changesCount
    }

    /// Queues given-up jobs again with a fresh count of attempts, due at `now`; `filter` narrows them (SQL over the
    /// table's columns, with its arguments).
    func requeue(_ db: Database, states: [String], filter: String = "1", _ arguments: StatementArguments = [], at now: Date) throws -> Int {
        let list = states.map { "'\($0)'" }.joined(separator: ", ")
        try db.execute(
            sql: "UPDATE \(table) SET state = 'pending', attempts = 0, next_attempt_at = ? WHERE state IN (\(list)) AND (\(filter))",
            arguments: [ISO.string(now)] + arguments)
        return db.changesCount
    }

    /// Waiting jobs due later than `now` become due now (the other side is back, or the user asked).
    func dueNow(_ db: Database, filter: String = "1", _ arguments: StatementArguments = [], at now: Date) throws -> Int {
        try db.execute(
            sql: "UPDATE \(table) SET next_attempt_at = ? WHERE state IN \(Self.waiting) AND next_attempt_at > ? AND (\(filter))",
            arguments: [ISO.string(now), ISO.string(now)] + arguments)
        return db.changesCount
    }
}
