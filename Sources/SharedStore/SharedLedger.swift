import Alerts
import AllowanceAPI
import Core
import Foundation
import PostgresTransport
import StoreContract

/// The delivery ledger the sink workers use, on the shared database: the same interface as the SQLite file's,
/// with a read of due deliveries that claims them for this replica (see `SharedRelayStore`).
extension SharedRelayStore: DeliveryLedger {
    /// A minute: rows another replica took after this one looked, and holds past its death, are seen within it.
    public var unsignalledChangesSeenWithin: Duration { .seconds(60) }

    /// Claims the due deliveries of `sink` for this replica: what another replica's claim left when it expired (that
    /// replica died), then what is pending and due. Nothing while the sink is paused. For a sink that keeps a child's
    /// alerts in order, only each child's oldest, and none of a child with one out (claimed by any replica).
    public func dueDeliveries(
        sink: String, at now: Date, limit: Int, excluding: Set<String>
    ) throws(StoreError) -> [Delivery] {
        let ordered = orderedSinks.withLock { $0.contains(sink) }
        // A child's delivery waits while another of the same sink and child is out, or an older one is pending.
        let inOrder =
            ordered
            ? """
            AND (d.child_id IS NULL OR (
              NOT EXISTS (SELECT 1 FROM relay_delivery b WHERE b.sink = $1 AND b.child_id = d.child_id AND b.state = 'in_flight'
                AND b.id <> d.id)
              AND (d.\(Delivery.firstSQL) OR NOT EXISTS (
                SELECT 1 FROM relay_delivery o WHERE o.sink = $1 AND o.child_id = d.child_id AND o.state = 'pending'
                AND (o.due_at, o.seq) < (d.due_at, d.seq)))))
            """ : ""
        let due = try working { db throws(PostgresError) -> [Delivery] in
            // Two parts, each through its own partial index (one query with OR scans the whole table: BENCHMARKS.md, session 21).
            try db.query(
                """
                WITH paused AS (
                  SELECT 1 FROM relay_sink_state WHERE sink = $1 AND paused_until > $4::timestamptz),
                expired AS (
                  SELECT d.id FROM relay_delivery d WHERE d.sink = $1 AND d.state = 'in_flight' AND d.claim_expires_at < now()
                    AND NOT (d.id = ANY($5::text[])) AND NOT EXISTS (SELECT 1 FROM paused)
                  ORDER BY d.claim_expires_at LIMIT $2 FOR UPDATE SKIP LOCKED),
                first AS (
                  SELECT d.id FROM relay_delivery d WHERE d.sink = $1 AND d.state = 'pending' AND d.due_at <= $4::timestamptz
                    AND d.\(Delivery.firstSQL) AND NOT (d.id = ANY($5::text[])) AND NOT EXISTS (SELECT 1 FROM paused) \(inOrder)
                  ORDER BY d.due_at, d.seq LIMIT $2 FOR UPDATE SKIP LOCKED),
                due AS (
                  SELECT d.id FROM relay_delivery d WHERE d.sink = $1 AND d.state = 'pending' AND d.due_at <= $4::timestamptz
                    AND NOT (d.id = ANY($5::text[])) AND NOT EXISTS (SELECT 1 FROM paused) \(inOrder)
                  ORDER BY d.due_at, d.seq LIMIT $2 FOR UPDATE SKIP LOCKED),
                picked AS (SELECT DISTINCT id FROM (SELECT id FROM expired UNION ALL SELECT id FROM first UNION ALL
                  (SELECT id FROM due)) ids LIMIT $2)
                UPDATE relay_delivery AS d SET state = 'in_flight', claimed_by = $3,
                  claim_expires_at = now() + make_interval(secs => $6::float8)
                FROM picked WHERE d.id = picked.id
                RETURNING \(Self.deliveryColumns("d")), d.seq
                """,
                [
                    sink, String(limit), replica, ISODate.string(now), Self.array(excluding),
                    String(Self.claimFor.inSeconds),
                ]
            ).rows.compactMap { row -> (seq: Int64, delivery: Delivery)? in
                guard var d = Self.delivery(row) else { return nil }
                d.state = .pending  // to the worker, a job to send
                return (Int64(row[15] ?? "") ?? 0, d)
            }
            // What goes first (`Delivery.first`), then due first, then in the order they were planned (ids made in one
            // millisecond do not sort so).
            .sorted {
                ($0.delivery.goesFirst ? 0 : 1, $0.delivery.nextAttemptAt, $0.seq) < (
                    $1.delivery.goesFirst ? 0 : 1, $1.delivery.nextAttemptAt, $1.seq
                )
            }.map(\.delivery)
        }
        return claimed(due)
    }

    public func pauseSink(_ sink: String, until: Date) throws(StoreError) {
        try working { db throws(PostgresError) in
            try db.query(
                """
                INSERT INTO relay_sink_state (sink, paused_until) VALUES ($1, $2::timestamptz)
                ON CONFLICT (sink) DO UPDATE SET paused_until = greatest(relay_sink_state.paused_until, EXCLUDED.paused_until)
                """, [sink, ISODate.string(until)])
        }
    }

    public func nextDeliveryDue(sink: String, excluding: Set<String>) throws(StoreError) -> Date? {
        try working { db throws(PostgresError) -> Date? in
            // The next due time by this replica's clock; a claim's expiry is the server's, read as seconds from now;
            // and not before another replica's pause of the sink ends.
            let row = try db.query(
                """
                SELECT extract(epoch FROM (SELECT min(due_at) FROM relay_delivery WHERE sink = $1 AND state = 'pending'
                                             AND NOT (id = ANY($2::text[])))),
                       extract(epoch FROM (SELECT min(claim_expires_at) FROM relay_delivery WHERE sink = $1 AND state = 'in_flight'
                                             AND claimed_by <> $3) - now()),
                       extract(epoch FROM (SELECT paused_until FROM relay_sink_state WHERE sink = $1))
                """, [sink, Self.array(excluding), replica]
            ).rows.first
            let due = row?[0].flatMap(Double.init).map(Date.init(timeIntervalSince1970:))
            let expiry = row?[1].flatMap(Double.init).map { Date().addingTimeInterval(max(0, $0) + 0.05) }
            guard let next = [due, expiry].compactMap({ $0 }).min() else { return nil }
            let paused = row?[2].flatMap(Double.init).map(Date.init(timeIntervalSince1970:))
            return max(next, paused ?? next)
        }
    }

    public func record(_ results: [(id: String, result: JobOutcome)]) throws(StoreError) {
        guard !results.isEmpty else { return }
        // The usual batch, all delivered, is one statement; a retry or a give-up is a statement of its own.
        var delivered: [String] = []
        var others: [(id: String, set: String, values: [String?])] = []
        for (id, outcome) in results {
            switch outcome {
            case .done: delivered.append(id)
            case .retry(let error, let at):
                others.append(
                    (id, "state = 'pending', last_error = $3, due_at = $4::timestamptz", [error, ISODate.string(at)]))
            case .gaveUp(let reason): others.append((id, "state = 'dead', last_error = $3", [reason]))
            }
        }
        try working { db throws(PostgresError) in
            let write = { () throws(PostgresError) in
                if !delivered.isEmpty {
                    try self.finish(
                        db, ids: delivered, "state = 'delivered', delivered_at = now(), last_error = NULL", [])
                }
                for other in others { try self.finish(db, ids: [other.id], other.set, other.values) }
                if !others.isEmpty { try db.notify(Self.channel) }
            }
            if others.isEmpty { try write() } else { try db.transaction(write) }
        }
    }

    /// Outcomes, written only where the claim is still this replica's (else another replica took the delivery
    /// after this one's claim expired, and its outcome is the one kept).
    private func finish(_ db: PostgresConnection, ids: [String], _ set: String, _ more: [String?]) throws(PostgresError)
    {
        try db.query(
            """
            UPDATE relay_delivery SET \(set), attempts = attempts + 1, claimed_by = NULL, claim_expires_at = NULL
            WHERE id = ANY($1::text[]) AND claimed_by = $2 AND state = 'in_flight'
            """, [Self.array(ids), replica] + more)
    }

    /// Claims them too: no other replica sends a part while this one folds it.
    public func foldableDeliveries(sink: String, child: UUID, dueBy: Date) throws(StoreError) -> [Delivery] {
        let parts = try working { db throws(PostgresError) -> [Delivery] in
            try db.query(
                """
                WITH parts AS (
                  SELECT id FROM relay_delivery WHERE sink = $1 AND child_id = $2 AND digest AND kind = $3
                    AND ((state = 'pending' AND due_at <= $4::timestamptz) OR (state = 'in_flight' AND claimed_by = $5))
                  FOR UPDATE SKIP LOCKED)
                UPDATE relay_delivery AS d SET state = 'in_flight', claimed_by = $5,
                  claim_expires_at = now() + make_interval(secs => $6::float8)
                FROM parts WHERE d.id = parts.id
                RETURNING \(Self.deliveryColumns("d"))
                """,
                [
                    sink, child.lowercased, RelayEvent.Kind.transactionCreated.rawValue, ISODate.string(dueBy), replica,
                    String(Self.claimFor.inSeconds),
                ]
            ).rows.compactMap(Self.delivery).sorted { $0.createdAt < $1.createdAt }
        }
        return claimed(parts)
    }

    /// The rows merged are this replica's claims (the batch it is sending) and rows still pending; another replica's
    /// claims are left alone.
    public func mergeSuperseded(
        sink: String, child: UUID, kind: RelayEvent.Kind, excluding: Set<String>
    ) throws(StoreError) -> Set<String> {
        try working { db throws(PostgresError) -> Set<String> in
            try db.transaction { () throws(PostgresError) -> Set<String> in
                let ids = try db.query(
                    """
                    SELECT id FROM relay_delivery WHERE sink = $1 AND child_id = $2 AND kind = $3
                      AND (state = 'pending' OR (state = 'in_flight' AND claimed_by = $4)) AND NOT (id = ANY($5::text[]))
                    ORDER BY created_at DESC, seq DESC FOR UPDATE SKIP LOCKED
                    """, [sink, child.lowercased, kind.rawValue, replica, Self.array(excluding)]
                ).rows.compactMap { $0[0] }
                guard let newest = ids.first, ids.count > 1 else { return [] }
                let older = Array(ids.dropFirst())
                try db.query(
                    """
                    UPDATE relay_delivery SET state = 'merged', merged_into = $1, claimed_by = NULL, claim_expires_at = NULL
                    WHERE id = ANY($2::text[])
                    """, [newest, Self.array(older)])
                return Set(older)
            }
        }
    }

    /// The digest (`Delivery.digest`) is claimed by this replica from the start; its parts are merged into it.
    public func foldIntoDigest(
        _ parts: [Delivery], digest event: RelayEvent, currency: String?, at now: Date
    ) throws(StoreError) -> Delivery {
        let digest = Delivery.digest(of: parts, event: event, currency: currency, at: now)
        try working { db throws(PostgresError) in
            try db.transaction { () throws(PostgresError) in
                try db.query(
                    """
                    INSERT INTO relay_delivery (id, sink, rule, kind, child_id, urgency, alert, state, due_at, created_at, trace_parent,
                                                claimed_by, claim_expires_at)
                    VALUES ($1, $2, $3, $4, $5, $6, $7, 'in_flight', $8::timestamptz, $8::timestamptz, $9, $10,
                            now() + make_interval(secs => $11::float8))
                    """,
                    [
                        digest.id, digest.sink, digest.rule, digest.kind.rawValue, digest.childId?.lowercased,
                        digest.urgency.rawValue, digest.alert, ISODate.string(now), digest.traceParent, replica,
                        String(Self.claimFor.inSeconds),
                    ])
                try db.query(
                    "UPDATE relay_delivery SET state = 'merged', merged_into = $1, claimed_by = NULL, claim_expires_at = NULL WHERE id = ANY($2::text[]) AND claimed_by = $3",
                    [digest.id, Self.array(parts.map(\.id)), replica])
            }
        }
        heartbeatDue.signal()
        return digest
    }

    public func disabledSinks() throws(StoreError) -> [String: String] {
        try working { db throws(PostgresError) -> [String: String] in
            Dictionary(
                try db.query("SELECT sink, disabled_reason FROM relay_sink_state WHERE disabled_reason IS NOT NULL")
                    .rows.map {
                        ($0[0] ?? "", $0[1] ?? "")
                    },
                uniquingKeysWith: { a, _ in a })
        }
    }

    public func heldDeliveries(dueAfter after: Date) throws(StoreError) -> [Delivery] {
        try working { db throws(PostgresError) -> [Delivery] in
            try db.query(
                "SELECT \(Self.deliveryColumns("d")) FROM relay_delivery d WHERE d.state = 'pending' AND d.attempts = 0 AND d.due_at > $1::timestamptz ORDER BY d.seq",
                [ISODate.string(after)]
            ).rows.compactMap(Self.delivery)
        }
    }

    public func replanHeld(_ changes: [(id: String, change: HeldChange)]) throws(StoreError) {
        guard !changes.isEmpty else { return }
        try working { db throws(PostgresError) in
            try db.transaction { () throws(PostgresError) in
                for (id, change) in changes {
                    switch change {
                    case .due(let at):
                        try db.query(
                            "UPDATE relay_delivery SET due_at = $2::timestamptz WHERE id = $1 AND state = 'pending' AND attempts = 0",
                            [id, ISODate.string(at)])
                    case .muted(let why):
                        try db.query(
                            "UPDATE relay_delivery SET state = 'muted', last_error = $2 WHERE id = $1 AND state = 'pending' AND attempts = 0",
                            [id, why])
                    }
                }
                try db.notify(Self.channel)
            }
        }
    }

    public func setSinkHealth(_ sink: String, _ health: SinkHealth?) throws(StoreError) {
        try working { db throws(PostgresError) in
            try db.query(
                """
                INSERT INTO relay_sink_state (sink, failing_since, failing_error, dead_lettering) VALUES ($1, $2::timestamptz, $3, $4)
                ON CONFLICT (sink) DO UPDATE SET failing_since = EXCLUDED.failing_since, failing_error = EXCLUDED.failing_error,
                  dead_lettering = EXCLUDED.dead_lettering
                """,
                [
                    sink, health.map { ISODate.string($0.failingSince) }, health?.lastError,
                    health?.deadLettering == true ? "true" : "false",
                ])
        }
    }

    public func sinkHealth() throws(StoreError) -> [String: SinkHealth] {
        try working { db throws(PostgresError) -> [String: SinkHealth] in
            Dictionary(
                try db.query(
                    """
                    SELECT sink, extract(epoch FROM failing_since), failing_error, dead_lettering FROM relay_sink_state
                    WHERE failing_since IS NOT NULL
                    """
                ).rows.compactMap { row -> (String, SinkHealth)? in
                    guard let sink = row[0], let since = row[1].flatMap(Double.init) else { return nil }
                    return (
                        sink,
                        SinkHealth(
                            failingSince: Date(timeIntervalSince1970: since), lastError: row[2] ?? "",
                            deadLettering: row[3] == "t")
                    )
                },
                uniquingKeysWith: { a, _ in a })
        }
    }

    public func disableSink(_ sink: String, reason: String, at now: Date) throws(StoreError) {
        try working { db throws(PostgresError) in
            try db.query(
                """
                INSERT INTO relay_sink_state (sink, disabled_reason, disabled_at) VALUES ($1, $2, $3::timestamptz)
                ON CONFLICT (sink) DO UPDATE SET disabled_reason = EXCLUDED.disabled_reason, disabled_at = EXCLUDED.disabled_at
                """, [sink, reason, ISODate.string(now)])
        }
    }

    @discardableResult
    public func raise(_ event: RelayEvent) throws(StoreError) -> Int {
        try writing { db throws(PostgresError) -> Int in
            try db.transaction { () throws(PostgresError) -> Int in
                let n = try plan(db, event, now: Date())
                if n > 0 { try db.notify(Self.channel) }
                return n
            }
        }
    }

    public func currentBalance(child: UUID) throws(StoreError) -> Decimal? {
        try working { db throws(PostgresError) -> Decimal? in
            try db.query("SELECT balance_minor FROM relay_child WHERE id = $1", [child.lowercased]).scalar.flatMap {
                Int64($0)
            }.map(Money.decimal(cents:))
        }
    }
}
