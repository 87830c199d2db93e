import AllowanceAPI
import Foundation
import GRDB
import SignalRProtocol

/// One alert owed to one sink, as the ledger holds it.
public struct Delivery: Sendable, Equatable {
    public var id: String
    public var sink: String
    public var rule: String
    public var kind: RelayEvent.Kind
    public var childId: UUID?
    public var urgency: PlannedDelivery.Urgency
    public var event: RelayEvent
    public var digest: Bool
    public var state: String
    public var attempts: Int
    public var nextAttemptAt: Date
    public var lastError: String?
    public var createdAt: Date
    public var deliveredAt: Date?
}

extension Store {
    /// The rules that turn events into deliveries (nil: the relay is off and nothing is planned), and what to call
    /// after a transaction that planned some has committed (wakes the sink workers).
    public func setPlanner(_ planner: (any AlertPlanner)?, onPlanned: (@Sendable () -> Void)? = nil) {
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

    /// Plans `event`'s deliveries inside the caller's SQLite transaction. Dedup: a delivery with the same key on the
    /// same sink inside its window is skipped.
    @discardableResult
    func planDeliveries(_ db: Database, _ event: RelayEvent, now: Date = Date()) throws -> Int {
        let planner = relay.withLock { $0?.planner }
        guard let planner else { return 0 }
        var inserted = 0
        for p in planner.plan(event) {
            if let key = p.dedupKey, let window = p.dedupWindow,
                try Bool.fetchOne(try db.cachedStatement(sql: "SELECT 1 FROM delivery WHERE sink = ? AND dedup_key = ? AND created_at >= ? LIMIT 1"), arguments: [p.sink, key, ISO.string(now.addingTimeInterval(-window))]) == true
            {
                continue
            }
            try db.executeCached(
                sql: """
                    INSERT INTO delivery (id, sink, rule, kind, child_id, urgency, alert, digest, dedup_key, state,
                                          next_attempt_at, created_at)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 'pending', ?, ?)
                    """,
                arguments: [
                    "dlv_" + UUID.timeOrdered(at: now).lowercased, p.sink, p.rule, p.kind.rawValue, event.childId?.lowercased,
                    p.urgency.rawValue, event.jsonText(), p.digest, p.dedupKey, ISO.string(p.notBefore ?? now),
                    ISO.string(now),
                ])
            inserted += 1
        }
        plannedInWrite.add(inserted, ordering: .relaxed)
        return inserted
    }

    // MARK: - Workers

    /// Deliveries of `sink` due now, oldest first.
    public func dueDeliveries(sink: String, at now: Date = Date(), limit: Int = 100) throws(StoreError) -> [Delivery] {
        try read { db in
            try Row.fetchAll(
                db,
                sql: "SELECT * FROM delivery WHERE sink = ? AND state = 'pending' AND next_attempt_at <= ? ORDER BY created_at, rowid LIMIT ?",
                arguments: [sink, ISO.string(now), limit]
            ).compactMap(Self.delivery)
        }
    }

    /// A child's foldable deliveries of `sink` due by `dueBy`: once one is due, the rest of a catch-up's pages
    /// (which waited only to gather) fold into the same digest.
    public func foldableDeliveries(sink: String, child: UUID, dueBy: Date) throws(StoreError) -> [Delivery] {
        try read { db in
            try Row.fetchAll(
                db,
                sql: """
                    SELECT * FROM delivery WHERE sink = ? AND child_id = ? AND state = 'pending' AND digest = 1
                        AND kind = 'transaction.created' AND next_attempt_at <= ?
                    ORDER BY created_at, rowid
                    """,
                arguments: [sink, child.lowercased, ISO.string(dueBy)]
            ).compactMap(Self.delivery)
        }
    }

    /// When the next pending delivery of `sink` falls due (nil: none pending).
    public func nextDeliveryDue(sink: String) throws(StoreError) -> Date? {
        try read { db in
            try String.fetchOne(
                db, sql: "SELECT MIN(next_attempt_at) FROM delivery WHERE sink = ? AND state = 'pending'", arguments: [sink]
            ).flatMap(ISODate.parse)
        }
    }

    public func deliveryInFlight(_ id: String) throws(StoreError) {
        try write { db in
            try db.execute(sql: "UPDATE delivery SET state = 'in_flight', attempts = attempts + 1 WHERE id = ?", arguments: [id])
        }
    }

    public func deliveryDone(_ id: String, at now: Date = Date()) throws(StoreError) {
        try write { db in
            try db.execute(
                sql: "UPDATE delivery SET state = 'delivered', delivered_at = ?, last_error = NULL WHERE id = ?",
                arguments: [ISO.string(now), id])
        }
    }

    public func deliveryRetry(_ id: String, error: String, at retryAt: Date) throws(StoreError) {
        try write { db in
            try db.execute(
                sql: "UPDATE delivery SET state = 'pending', last_error = ?, next_attempt_at = ? WHERE id = ?",
                arguments: [error, ISO.string(retryAt), id])
        }
    }

    /// Given up (dead letter), with the reason; `deliveries retry` can queue it again.
    public func deliveryDead(_ id: String, reason: String) throws(StoreError) {
        try write { db in
            try db.execute(sql: "UPDATE delivery SET state = 'dead', last_error = ? WHERE id = ?", arguments: [reason, id])
        }
    }

    /// After a crash nothing is really in flight: those go out again with the same id (receivers dedup on it).
    @discardableResult
    public func requeueInFlightDeliveries() throws(StoreError) -> Int {
        try write { db in
            try db.execute(sql: "UPDATE delivery SET state = 'pending' WHERE state = 'in_flight'")
            return db.changesCount
        }
    }

    /// Folds several deliveries of one sink into one new digest delivery, in one SQLite transaction: the parts
    /// become `merged` and point at it. The digest has its own stable id from then on.
    public func foldIntoDigest(_ parts: [Delivery], digest event: RelayEvent, at now: Date = Date()) throws(StoreError) -> Delivery {
        precondition(!parts.isEmpty)
        return try write { db in
            let id = "dlv_" + UUID.timeOrdered(at: now).lowercased
            let first = parts[0]
            let urgency = parts.contains { $0.urgency == .critical } ? "critical" : first.urgency.rawValue
            try db.execute(
                sql: """
                    INSERT INTO delivery (id, sink, rule, kind, child_id, urgency, alert, digest, state, next_attempt_at, created_at)
                    VALUES (?, ?, ?, 'digest', ?, ?, ?, 0, 'pending', ?, ?)
                    """,
                arguments: [id, first.sink, first.rule, event.childId?.lowercased, urgency, event.jsonText(), ISO.string(now), ISO.string(now)])
            for p in parts {
                try db.execute(sql: "UPDATE delivery SET state = 'merged', merged_into = ? WHERE id = ? AND state = 'pending'", arguments: [id, p.id])
            }
            return try Row.fetchOne(db, sql: "SELECT * FROM delivery WHERE id = ?", arguments: [id]).flatMap(Self.delivery)!
        }
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
            try db.execute(
                sql: "UPDATE delivery SET next_attempt_at = ? WHERE sink = ? AND state = 'pending'", arguments: [ISO.string(now), sink])
        }
    }

    /// Disabled sinks and why.
    public func disabledSinks() throws(StoreError) -> [String: String] {
        try read { db in
            Dictionary(
                uniqueKeysWithValues: try Row.fetchAll(db, sql: "SELECT sink, disabled_reason FROM sink_state WHERE disabled_reason IS NOT NULL")
                    .map { ($0["sink"] as String, $0["disabled_reason"] as String) })
        }
    }

    // MARK: - The CLI's view

    public func deliveries(sink: String? = nil, state: String? = nil, limit: Int = 100) throws(StoreError) -> [Delivery] {
        try read { db in
            let filter = [sink == nil ? nil : "sink = :sink", state == nil ? nil : "state = :state"].compactMap { $0 }
            let clause = filter.isEmpty ? "" : "WHERE " + filter.joined(separator: " AND ")
            return try Row.fetchAll(
                db, sql: "SELECT * FROM delivery \(clause) ORDER BY created_at DESC, rowid DESC LIMIT :limit",
                arguments: ["sink": sink, "state": state, "limit": limit]
            ).compactMap(Self.delivery)
        }
    }

    /// Per sink: how many deliveries are in each state.
    public func deliveryCounts() throws(StoreError) -> [String: [String: Int]] {
        try read { db in
            var counts: [String: [String: Int]] = [:]
            for row in try Row.fetchAll(db, sql: "SELECT sink, state, COUNT(*) AS n FROM delivery GROUP BY sink, state") {
                counts[row["sink"], default: [:]][row["state"]] = row["n"]
            }
            return counts
        }
    }

    /// Queues dead deliveries again (one by id, or all of a sink's), with a fresh count of attempts.
    @discardableResult
    public func retryDeliveries(id: String? = nil, sink: String? = nil, at now: Date = Date()) throws(StoreError) -> Int {
        try write { db in
            try db.execute(
                sql: """
                    UPDATE delivery SET state = 'pending', attempts = 0, next_attempt_at = :now
                    WHERE state = 'dead' AND (:id IS NULL OR id = :id) AND (:sink IS NULL OR sink = :sink)
                    """,
                arguments: ["now": ISO.string(now), "id": id, "sink": sink])
            return db.changesCount
        }
    }

    /// Deletes finished deliveries (delivered, merged, and dead when asked) created before `before`.
    @discardableResult
    public func purgeDeliveries(before: Date, includingDead: Bool) throws(StoreError) -> Int {
        try write { db in
            let states = includingDead ? "('delivered', 'merged', 'dead')" : "('delivered', 'merged')"
            try db.execute(sql: "DELETE FROM delivery WHERE state IN \(states) AND created_at < ?", arguments: [ISO.string(before)])
            return db.changesCount
        }
    }

    static func delivery(_ row: Row) -> Delivery? {
        guard let json = try? JSONValue(parsing: Array((row["alert"] as String).utf8)), let event = try? RelayEvent(json: json),
            let kind = RelayEvent.Kind(rawValue: row["kind"]), let urgency = PlannedDelivery.Urgency(rawValue: row["urgency"])
        else { return nil }
        return Delivery(
            id: row["id"], sink: row["sink"], rule: row["rule"], kind: kind, childId: (row["child_id"] as String?).flatMap(UUID.init(uuidString:)),
            urgency: urgency, event: event, digest: row["digest"], state: row["state"], attempts: row["attempts"],
            nextAttemptAt: ISODate.parse(row["next_attempt_at"]) ?? .distantPast, lastError: row["last_error"],
            createdAt: ISODate.parse(row["created_at"]) ?? .distantPast,
            deliveredAt: (row["delivered_at"] as String?).flatMap(ISODate.parse))
    }
}
