import Foundation
import GRDB
import StoreContract

/// A row of a durable queue: its table (`TableRecord`), read as a typed record (`FetchableRecord`), with a state,
/// a count of attempts, a last error and a due time (`next_attempt_at`).
protocol QueuedJob: FetchableRecord, TableRecord {
    associatedtype State: JobState & DatabaseValueConvertible
    /// What names one job: the outbox's sequence number, a delivery's id.
    associatedtype Key
    /// The SQL condition that finds one job by its key, and the values it binds.
    static var keyCondition: String { get }
    static func keyValues(_ key: Key) -> [SQLValue]
    /// Where the time a job was done is kept, if the table keeps it.
    static var doneAtColumn: String? { get }
    /// The outcome's statements, written once for the type: `static let recordSQL = OutcomeSQL(Self.self)`.
    static var recordSQL: OutcomeSQL { get }
}

/// The statements that record a job's outcome (`JobQueue.record`), written once for its type rather than for every
/// outcome: a delivery's outcome is written for every alert sent.
struct OutcomeSQL: Sendable {
    private let done: [String]
    private let retry: [String]
    private let gaveUp: [String]

    init<Job: QueuedJob>(_: Job.Type) {
        let table = Job.databaseTableName
        let stamp = Job.doneAtColumn.map { ", \($0) = ?" } ?? ""
        let counts = ["attempts = attempts", "attempts = attempts + 1"]
        done = counts.map {
            "UPDATE \(table) SET state = ?, \($0), last_error = NULL\(stamp) WHERE \(Job.keyCondition)"
        }
        retry = counts.map {
            "UPDATE \(table) SET state = ?, \($0), last_error = ?, next_attempt_at = ? WHERE \(Job.keyCondition)"
        }
        gaveUp = counts.map { "UPDATE \(table) SET state = ?, \($0), last_error = ? WHERE \(Job.keyCondition)" }
    }

    func done(attempted: Bool) -> String { done[attempted ? 1 : 0] }
    func retry(attempted: Bool) -> String { retry[attempted ? 1 : 0] }
    func gaveUp(attempted: Bool) -> String { gaveUp[attempted ? 1 : 0] }
}

/// The one durable-queue machine of the store, shared by the outbox (writes waiting for the server) and the
/// delivery ledger (alerts owed to sinks): a job is pending until it falls due, is taken without a write (a crash
/// during its attempt leaves it pending; the retry carries the same idempotency key or `webhook-id`), and its
/// outcome is recorded as done, a retry at a time, or given up. The statements are written once, here, from the
/// record type (its table) and its state enum (the values); they are cached, as every statement on the hot path.
enum JobQueue<Job: QueuedJob> {
    private static var table: String { Job.databaseTableName }

    /// The claim's read, the one for every queue: waiting jobs (due by `dueBy`, or due after `dueAfter`, when
    /// given) that `filter` (SQL over the table's columns) keeps, in `order`, at most `limit`, each as `read` makes
    /// it (nil: left out). Rows, not records: a caller decides what an unreadable row becomes (the ledger makes it a
    /// dead letter). Nothing is written: a crash during an attempt leaves the job waiting.
    ///
    /// Each row is read where SQLite has it, and is valid only inside `read`. A copied row (`Row.fetchAll`) finds a
    /// column by name by lowercasing every column's name, for every lookup: reading a delivery that way lowercased
    /// some two hundred strings, more than any other one thing the worker did for a send at 1,000 a second.
    static func waiting<T>(
        _ db: Database, dueBy: Date? = nil, dueAfter: Date? = nil, filter: String = "1",
        _ arguments: StatementArguments = [],
        order: String, limit: Int? = nil, _ read: (Row) throws -> T?
    ) throws -> [T] {
        var sql = "SELECT * FROM \(table) WHERE state IN \(Job.State.waitingSQL)"
        var values: StatementArguments = []
        if let dueBy {
            sql += " AND next_attempt_at <= ?"
            values += [ISO.string(dueBy)]
        }
        if let dueAfter {
            sql += " AND next_attempt_at > ?"
            values += [ISO.string(dueAfter)]
        }
        sql += " AND (\(filter)) ORDER BY \(order)"
        values += arguments
        if let limit {
            sql += " LIMIT ?"
            values += [limit]
        }
        var jobs: [T] = []
        let rows = try Row.fetchCursor(try db.cachedStatement(sql: sql), arguments: values)
        while let row = try rows.next() {
            if let job = try read(row) { jobs.append(job) }
        }
        return jobs
    }

    /// How many jobs are still owed (`filter` narrows them).
    static func waitingCount(_ db: Database, filter: String = "1", _ arguments: StatementArguments = []) throws -> Int {
        try Int.fetchOne(
            try db.cachedStatement(
                sql: "SELECT COUNT(*) FROM \(table) WHERE state IN \(Job.State.waitingSQL) AND (\(filter))"),
            arguments: arguments) ?? 0
    }

    /// Records the outcome of one attempt: the attempt is counted (unless `attempted` is false: given up before
    /// one was made), the state and error set. `gaveUpAs` names another final state than the dead letter (the
    /// outbox's `rejected`).
    static func record(
        _ db: Database, _ key: Job.Key, _ outcome: JobOutcome, attempted: Bool = true, gaveUpAs: Job.State? = nil
    ) throws {
        // Bound straight to SQLite: a delivery's outcome is written for every alert sent (BENCHMARKS.md, session 45).
        var values: [SQLValue] = []
        values.reserveCapacity(6)
        let sql: String
        switch outcome {
        case .done(let at):
            sql = Job.recordSQL.done(attempted: attempted)
            values.append(.text(Job.State.done.rawValue))
            if Job.doneAtColumn != nil { values.append(.date(at)) }
        case .retry(let error, let at):
            sql = Job.recordSQL.retry(attempted: attempted)
            values.append(.text(Job.State.pending.rawValue))
            values.append(.text(error))
            values.append(.date(at))
        case .gaveUp(let reason):
            sql = Job.recordSQL.gaveUp(attempted: attempted)
            values.append(.text((gaveUpAs ?? Job.State.dead).rawValue))
            values.append(.text(reason))
        }
        values.append(contentsOf: Job.keyValues(key))
        try db.executeCached(sql: sql, values: values)
    }

    /// Marks a job as being attempted, for a queue whose readers must know that it may have reached the other side
    /// (the outbox: the hub can echo a write before its POST is answered, and the echo is matched to it). The
    /// attempt is counted with its outcome; a crash leaves the job in flight until `requeueInFlight`.
    static func markInFlight(_ db: Database, _ key: Job.Key) throws {
        try db.executeCached(
            sql: "UPDATE \(table) SET state = ? WHERE \(Job.keyCondition)",
            values: [.text(Job.State.inFlight.rawValue)] + Job.keyValues(key))
    }

    /// Jobs left in flight by a crash: pending again.
    static func requeueInFlight(_ db: Database) throws -> Int {
        try db.execute(
            sql: "UPDATE \(table) SET state = ? WHERE state = ?", arguments: [Job.State.pending, Job.State.inFlight])
        return db.changesCount
    }

    /// Queues jobs in `states` again with a fresh count of attempts, due at `now`; `filter` narrows them (SQL over
    /// the table's columns, with its arguments).
    static func requeue(
        _ db: Database, states: [Job.State], filter: String = "1", _ arguments: StatementArguments = [], at now: Date
    ) throws -> Int {
        let list = states.map { _ in "?" }.joined(separator: ", ")
        try db.execute(
            sql:
                "UPDATE \(table) SET state = ?, attempts = 0, next_attempt_at = ? WHERE state IN (\(list)) AND (\(filter))",
            arguments: [Job.State.pending, ISO.string(now)] + StatementArguments(states) + arguments)
        return db.changesCount
    }

    /// Waiting jobs due later than `now` become due now (the other side is back, or the user asked).
    static func dueNow(
        _ db: Database, filter: String = "1", _ arguments: StatementArguments = [], at now: Date
    ) throws -> Int {
        try db.execute(
            sql:
                "UPDATE \(table) SET next_attempt_at = ? WHERE state IN \(Job.State.waitingSQL) AND next_attempt_at > ? AND (\(filter))",
            arguments: [ISO.string(now), ISO.string(now)] + arguments)
        return db.changesCount
    }
}
