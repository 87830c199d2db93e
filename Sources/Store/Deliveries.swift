import Alerts
import AllowanceAPI
import Core
import Foundation
import GRDB
import StoreContract

extension Store {
    /// The rules that turn events into deliveries (nil: the relay is off and nothing is planned), and what to call
    /// after a transaction that planned some has committed, with the rows it planned, in order (the relay wakes
    /// the sinks that got work and hands them their rows).
    public func setPlanner(_ planner: (any AlertPlanner)?, onPlanned: (@Sendable ([Delivery]) -> Void)? = nil) {
        let hooks = planner.map { PlannerHooks(planner: $0, onPlanned: onPlanned) }
        relay.withLock { $0 = hooks }
    }

    /// Records an event that did not come from the hub (a connection lost for long, a sink disabled) and plans
    /// its deliveries, in one SQLite transaction. Returns how many deliveries were planned.
    @discardableResult
    public func raise(_ event: RelayEvent) throws(StoreError) -> Int {
        try write { db in try planDeliveries(db, event) }
    }

    /// Whether events of `kind` can plan anything (a planner is installed and one of its rules may take them).
    func plansAny(_ kind: RelayEvent.Kind) -> Bool {
        relay.withLock { $0?.planner.mayPlan(for: kind) ?? false }
    }

    /// Plans `event`'s deliveries inside the caller's SQLite transaction (`DeliveryPlanning`, the one policy); the
    /// rows not muted are handed to the workers once the transaction commits.
    @discardableResult
    func planDeliveries(_ db: Database, _ event: RelayEvent, now: Date = Date()) throws -> Int {
        // Compared whether or not a rule watches goals: a rule added later starts from the true state.
        let goals = try goalsReached(db, by: event)
        guard let planner = relay.withLock({ $0?.planner }) else { return 0 }
        let rows = try DeliveryPlanning.plan(event, planner: planner, gathering: gathering, now: now) {
            sink, key, since in
            try db.fetchCachedInt64(
                sql: "SELECT 1 FROM delivery WHERE sink = ? AND dedup_key = ? AND created_at >= ? LIMIT 1",
                values: [.text(sink), .text(key), .date(since)]) != nil
        } write: { d, key in
            try Delivery.insert(db, d, dedupKey: key, createdAt: now)
        }
        // A muted row is kept, not handed to a worker. The rows are handed as they are when none is (the usual
        // case): each copy of a delivery retains every text of it and of its alert.
        let handed = rows.contains { $0.state == .muted } ? rows.filter { $0.state != .muted } : rows
        if !handed.isEmpty {
            planned.withLock {
                if $0.isEmpty { $0 = handed } else { $0 += handed }
            }
        }
        var count = rows.count
        for goal in goals { count += try planDeliveries(db, goal, now: now) }
        return count
    }

    // MARK: - Workers

    /// Five minutes, as the outbox's poll: `deliveries retry|enable` and every other writer signal the relay.
    public var unsignalledChangesSeenWithin: Duration { .seconds(300) }

    /// Deliveries of `sink` due now, oldest first, leaving out `excluding` (the worker's own, being sent). Nothing is
    /// written for a claim: a crash during the send leaves the row pending, and it goes again with the same id.
    /// A row that cannot be read (an unknown kind or urgency) becomes a dead letter with the reason, here.
    public func dueDeliveries(
        sink: String, at now: Date = Date(), limit: Int = 100, excluding: Set<String> = []
    ) throws(StoreError) -> [Delivery] {
        try dueDeliveriesAndNext(sink: sink, at: now, limit: limit, excluding: excluding, withNext: false).due
    }

    /// `dueDeliveries`, and in the same read when the next of the others falls due (nil: none waits): a worker that
    /// has started everything due knows how long it may sleep without asking again.
    public func dueDeliveriesAndNext(
        sink: String, at now: Date = Date(), limit: Int = 100, excluding: Set<String> = []
    ) throws(StoreError) -> (due: [Delivery], next: Date?) {
        try dueDeliveriesAndNext(sink: sink, at: now, limit: limit, excluding: excluding, withNext: true)
    }

    private func dueDeliveriesAndNext(
        sink: String, at now: Date, limit: Int, excluding: Set<String>, withNext: Bool
    ) throws(StoreError) -> (due: [Delivery], next: Date?) {
        var unreadable: [(id: String, reason: String)] = []
        let (due, next) = try read { db -> ([Delivery], Date?) in
            func readable(_ row: Row) -> Delivery? {
                guard !excluding.contains(row["id"]) else { return nil }
                do {
                    return try Delivery(row: row)
                } catch {
                    unreadable.append((row["id"], Delivery.unreadable(error)))
                    return nil
                }
            }
            // What goes first (`Delivery.first`), then the rest, each oldest first.
            let first = try JobQueue<Delivery>.waiting(
                db, dueBy: now, filter: "sink = ? AND \(Delivery.firstSQL)", [sink], order: "created_at, rowid",
                limit: limit + excluding.count, readable)
            let rest = try JobQueue<Delivery>.waiting(
                db, dueBy: now, filter: "sink = ? AND NOT \(Delivery.firstSQL)", [sink], order: "created_at, rowid",
                limit: limit + excluding.count, readable)
            guard withNext else { return (first + rest, nil) }
            return (first + rest, try Self.nextDue(db, sink: sink, after: now, excluding: excluding))
        }
        if !unreadable.isEmpty {
            try record(unreadable.map { ($0.id, .gaveUp(reason: "unreadable in the ledger: \($0.reason)")) })
        }
        // More than `limit` due: the rest are due now.
        return due.count > limit ? (Array(due.prefix(limit)), now) : (due, next)
    }

    /// A child's foldable deliveries of `sink` due by `dueBy`: once one is due, the rest of a catch-up's pages
    /// (which waited only to gather) fold into the same digest.
    public func foldableDeliveries(sink: String, child: UUID, dueBy: Date) throws(StoreError) -> [Delivery] {
        try read { db in
            try JobQueue<Delivery>.waiting(
                db, dueBy: dueBy, filter: "sink = ? AND child_id = ? AND digest = 1 AND kind = ?",
                [sink, child.lowercased, RelayEvent.Kind.transactionCreated.rawValue], order: "created_at, rowid"
            ) { try? Delivery(row: $0) }
        }
    }

    /// When the next pending delivery of `sink` not in `excluding` falls due (nil: none pending).
    public func nextDeliveryDue(sink: String, excluding: Set<String> = []) throws(StoreError) -> Date? {
        try read { db in try Self.nextDue(db, sink: sink, excluding: excluding) }
    }

    /// When the first waiting delivery of `sink` not in `excluding` (and due after `after`, when given) falls due.
    private static func nextDue(
        _ db: Database, sink: String, after: Date? = nil, excluding: Set<String>
    ) throws -> Date? {
        try JobQueue<Delivery>.waiting(
            db, dueAfter: after, filter: "sink = ?", [sink], order: "next_attempt_at", limit: excluding.count + 1
        ) { row in excluding.contains(row["id"]) ? nil : row["next_attempt_at"] as String }
        .first.flatMap(ISODate.parse)
    }

    /// The outcomes of several sends, in one SQLite transaction that does not wait for the disk: a power cut may
    /// forget that some went out, and they go again with the same ids (as after any crash between a send and its
    /// record); a kill -9 forgets nothing.
    public func record(_ results: [(id: String, result: JobOutcome)]) throws(StoreError) {
        guard !results.isEmpty else { return }
        try writeWithoutSync { db in try Self.writeOutcomes(db, results) }
    }

    /// The one place sends' outcomes are written: in a commit of their own (`record`) or carried by another write's.
    static func writeOutcomes(_ db: Database, _ results: [(id: String, result: JobOutcome)]) throws {
        for (id, result) in results { try JobQueue<Delivery>.record(db, id, result) }
    }

    /// The outcomes of several sends, written with the next write's commit (the next event's, usually) when one
    /// comes within `window`, else on their own as `record` does: one commit a transaction instead of two, in a
    /// steady stream of events to a sink that keeps up. Returns once they are written.
    public func record(
        _ results: [(id: String, result: JobOutcome)], withNextWriteWithin window: Duration
    )
        async throws(StoreError)
    {
        guard !results.isEmpty else { return }
        let wake = Wakeup()
        let ticket = carried.leave(results, wake: wake)
        var wait = window
        while true {
            await wake.wait(upTo: wait, evenIfCancelled: true)
            switch carried.claim(ticket) {
            case .written: return
            case .yours(let results): return try record(results)
            case .inAWrite: wait = .seconds(60)  // its commit or rollback signals
            }
        }
    }

    /// Rows an older version left `in_flight` at a crash: pending again (they go out with the same id).
    @discardableResult
    public func requeueInFlightDeliveries() throws(StoreError) -> Int {
        try write { db in try JobQueue<Delivery>.requeueInFlight(db) }
    }

    public func mergeSuperseded(
        sink: String, child: UUID, kind: RelayEvent.Kind, excluding: Set<String>
    ) throws(StoreError) -> Set<String> {
        try write { db -> Set<String> in
            let waiting = try JobQueue<Delivery>.waiting(
                db, filter: "sink = ? AND child_id = ? AND kind = ?", [sink, child.lowercased, kind.rawValue],
                order: "created_at DESC, rowid DESC"
            ) { row in excluding.contains(row["id"]) ? nil : row["id"] as String }
            guard let newest = waiting.first, waiting.count > 1 else { return [] }
            let older = Array(waiting.dropFirst())
            for id in older { try Delivery.merge(db, id, into: newest) }
            return Set(older)
        }
    }

    /// Folds several deliveries of one sink into one new digest delivery, in one SQLite transaction: the parts
    /// become `merged` and point at it. The digest has its own stable id from then on.
    public func foldIntoDigest(
        _ parts: [Delivery], digest event: RelayEvent, currency: String?, at now: Date = Date()
    ) throws(StoreError) -> Delivery {
        let digest = Delivery.digest(of: parts, event: event, currency: currency, at: now)
        try write { db in
            try Delivery.insert(db, digest, dedupKey: nil, createdAt: now)
            for p in parts { try Delivery.merge(db, p.id, into: digest.id) }
        }
        return digest
    }

    // MARK: - Sinks turned off by the server

    public func disableSink(_ sink: String, reason: String, at now: Date = Date()) throws(StoreError) {
        try write { db in
            try db.execute(
                sql: """
                    INSERT INTO sink_state (sink, disabled_reason, disabled_at) VALUES (?, ?, ?)
                    ON CONFLICT(sink) DO UPDATE SET disabled_reason = excluded.disabled_reason, disabled_at = excluded.disabled_at
                    """,
                arguments: [sink, reason, ISO.string(now)])
        }
    }

    /// Turns a disabled sink back on; its waiting deliveries go out at once.
    public func enableSink(_ sink: String, at now: Date = Date()) throws(StoreError) {
        try write { db in
            try db.execute(sql: "DELETE FROM sink_state WHERE sink = ?", arguments: [sink])
            _ = try JobQueue<Delivery>.dueNow(db, filter: "sink = ?", [sink], at: now)
        }
    }

    public func heldDeliveries(dueAfter after: Date) throws(StoreError) -> [Delivery] {
        try read { db in
            try JobQueue<Delivery>.waiting(db, dueAfter: after, filter: "attempts = 0", order: "created_at, rowid") {
                try? Delivery(row: $0)
            }
        }
    }

    public func replanHeld(_ changes: [(id: String, change: HeldChange)]) throws(StoreError) {
        guard !changes.isEmpty else { return }
        try write { db in
            for (id, change) in changes {
                switch change {
                case .due(let at):
                    try db.executeCached(
                        sql:
                            "UPDATE delivery SET next_attempt_at = ? WHERE \(Delivery.keyCondition) AND attempts = 0 AND state IN \(Delivery.State.waitingSQL)",
                        values: [.date(at)] + Delivery.keyValues(id))
                case .muted(let why):
                    try db.executeCached(
                        sql:
                            "UPDATE delivery SET state = ?, last_error = ? WHERE \(Delivery.keyCondition) AND attempts = 0 AND state IN \(Delivery.State.waitingSQL)",
                        values: [.text(Delivery.State.muted.rawValue), .text(why)] + Delivery.keyValues(id))
                }
            }
        }
    }

    public func setSinkHealth(_ sink: String, _ health: SinkHealth?) throws(StoreError) {
        try write { db in
            try db.execute(
                sql: """
                    INSERT INTO sink_state (sink, failing_since, failing_error, dead_lettering) VALUES (?, ?, ?, ?)
                    ON CONFLICT(sink) DO UPDATE SET failing_since = excluded.failing_since, failing_error = excluded.failing_error,
                      dead_lettering = excluded.dead_lettering
                    """,
                arguments: [
                    sink, health.map { ISO.string($0.failingSince) }, health?.lastError, health?.deadLettering ?? false,
                ])
        }
    }

    public func sinkHealth() throws(StoreError) -> [String: SinkHealth] {
        try read { db in
            Dictionary(
                uniqueKeysWithValues: try Row.fetchAll(
                    db,
                    sql:
                        "SELECT sink, failing_since, failing_error, dead_lettering FROM sink_state WHERE failing_since IS NOT NULL"
                ).compactMap { row -> (String, SinkHealth)? in
                    guard let since = ISODate.parse(row["failing_since"]) else { return nil }
                    return (
                        row["sink"],
                        SinkHealth(
                            failingSince: since, lastError: row["failing_error"] ?? "",
                            deadLettering: row["dead_lettering"])
                    )
                })
        }
    }

    /// Disabled sinks and why.
    public func disabledSinks() throws(StoreError) -> [String: String] {
        try read { db in
            Dictionary(
                uniqueKeysWithValues: try Row.fetchAll(
                    try db.cachedStatement(
                        sql: "SELECT sink, disabled_reason FROM sink_state WHERE disabled_reason IS NOT NULL")
                )
                .map { ($0["sink"] as String, $0["disabled_reason"] as String) })
        }
    }

    // MARK: - The CLI's view

    public func deliveries(
        sink: String? = nil, state: Delivery.State? = nil, limit: Int = 100
    ) throws(StoreError) -> [Delivery] {
        try read { db in
            let filter = [sink == nil ? nil : "sink = :sink", state == nil ? nil : "state = :state"].compactMap { $0 }
            let clause = filter.isEmpty ? "" : "WHERE " + filter.joined(separator: " AND ")
            return try Row.fetchAll(
                db, sql: "SELECT * FROM delivery \(clause) ORDER BY created_at DESC, rowid DESC LIMIT :limit",
                arguments: ["sink": sink, "state": state, "limit": limit]
            ).compactMap { try? Delivery(row: $0) }
        }
    }

    /// One delivery by id (nil: none; a row that cannot be read is an error saying why).
    public func delivery(id: String) throws(StoreError) -> Delivery? {
        let row = try read { db in
            try Row.fetchOne(
                db, sql: "SELECT * FROM delivery WHERE \(Delivery.keyCondition)",
                arguments: StatementArguments(Delivery.keyValues(id).map(\.databaseValue)))
        }
        guard let row else { return nil }
        do {
            return try Delivery(row: row)
        } catch {
            throw StoreError(path: path, "The delivery \(id) cannot be read: \(Delivery.unreadable(error)).")
        }
    }

    /// Per sink: how many deliveries are in each state. Reads the ledger whole (the status asks it once).
    public func deliveryCounts() throws(StoreError) -> [String: [String: Int]] {
        try counts("SELECT sink, state, COUNT(*) AS n FROM delivery GROUP BY sink, state")
    }

    /// Per sink: the deliveries pending, in flight and dead, each found through its partial index (`delivery_due`,
    /// `delivery_dead`): a scrape of `/metrics` reads no delivered row.
    public func owedDeliveryCounts() throws(StoreError) -> [String: [String: Int]] {
        try counts(Self.owedCountsSQL)
    }

    static let owedCountsSQL = """
        SELECT sink, state, COUNT(*) AS n FROM delivery WHERE state IN \(Delivery.State.waitingSQL) GROUP BY sink, state
        UNION ALL
        SELECT sink, state, COUNT(*) AS n FROM delivery WHERE state = '\(Delivery.State.dead.rawValue)' GROUP BY sink
        """

    private func counts(_ sql: String) throws(StoreError) -> [String: [String: Int]] {
        try read { db in
            var counts: [String: [String: Int]] = [:]
            for row in try Row.fetchAll(db, sql: sql) { counts[row["sink"], default: [:]][row["state"]] = row["n"] }
            return counts
        }
    }

    /// Queues dead deliveries again (one by id, or all of a sink's), with a fresh count of attempts.
    @discardableResult
    public func retryDeliveries(id: String? = nil, sink: String? = nil, at now: Date = Date()) throws(StoreError) -> Int
    {
        try write { db in
            try JobQueue<Delivery>.requeue(
                db, states: [.dead], filter: "(? IS NULL OR id = ?) AND (? IS NULL OR sink = ?)", [id, id, sink, sink],
                at: now)
        }
    }

    /// Deletes finished deliveries (delivered, merged, and dead when asked) created before `before`.
    @discardableResult
    public func purgeDeliveries(before: Date, includingDead: Bool) throws(StoreError) -> Int {
        try write { db in
            let states: [Delivery.State] = includingDead ? [.delivered, .merged, .dead] : [.delivered, .merged]
            try db.execute(
                sql:
                    "DELETE FROM delivery WHERE state IN (\(states.map { _ in "?" }.joined(separator: ", "))) AND created_at < ?",
                arguments: StatementArguments(states) + [ISO.string(before)])
            return db.changesCount
        }
    }
}

extension Store {
    public func currentBalance(child: UUID) throws(StoreError) -> Decimal? {
        try read { db in try Self.childBalance(db, child).map(Money.decimal(cents:)) }
    }
}

extension Delivery.State: DatabaseValueConvertible {}

/// A ledger row as a typed record (GRDB's `FetchableRecord`); the queue's machine is `JobQueue<Delivery>`.
extension Delivery: FetchableRecord, TableRecord, QueuedJob {
    public static let databaseTableName = "delivery"
    static let doneAtColumn: String? = "delivered_at"
    static let recordSQL = OutcomeSQL(Self.self)

    /// A row as a record; an unknown kind, urgency or state (a row from a newer version, a damaged file) throws
    /// with the reason. The alert is not decoded here: the generic webhook never needs it decoded, the others once.
    public init(row: Row) throws {
        func unknown(_ column: String) -> APIError {
            APIError(.invalidPayload, "unknown \(column) '\(row[column] as String? ?? "")'")
        }
        guard let kind = RelayEvent.Kind(rawValue: row["kind"]) else { throw unknown("kind") }
        guard let urgency = PlannedDelivery.Urgency(rawValue: row["urgency"]) else { throw unknown("urgency") }
        guard let state = Delivery.State(rawValue: row["state"]) else { throw unknown("state") }
        self.init(
            id: row["id"], sink: row["sink"], rule: row["rule"], kind: kind,
            childId: (row["child_id"] as String?).flatMap(UUID.init(uuidString:)), urgency: urgency,
            alert: row["alert"],
            digest: row["digest"], state: state, attempts: row["attempts"],
            nextAttemptAt: ISODate.parse(row["next_attempt_at"]) ?? .distantPast, lastError: row["last_error"],
            createdAt: ISODate.parse(row["created_at"]) ?? .distantPast,
            deliveredAt: (row["delivered_at"] as String?).flatMap(ISODate.parse), traceParent: row["trace_parent"])
    }

    /// The reason a row cannot be read, for the dead letter it becomes.
    static func unreadable(_ error: any Error) -> String {
        (error as? APIError)?.message ?? "\(error)"
    }
}
