import Alerts
import AllowanceAPI
import Core
import Foundation
import PostgresTransport
import StoreContract

/// The sync contract on PostgreSQL: what the one sync engine (`SyncCoordinator`, `CatchUp`) asks of the SQLite file,
/// with the same answers, so that the link holder of a set of replicas keeps the shared cache as whole as a single
/// relay keeps its file: the server it is bound to, lost data, balances that do not add up, deleted children, rows
/// set aside, the history a new database takes without alerting it.
///
/// Times are the relay's (`now`), never the server's `now()`: they are compared with the relay's clock (a catch-up's
/// start, the moment the balances were asked for).
extension SharedRelayStore: SyncStore {
    static let syncTables = PostgresMigration(
        5, "sync checks",
        """
        ALTER TABLE relay_child ADD COLUMN removed_at timestamptz, ADD COLUMN last_name text NOT NULL DEFAULT '',
            ADD COLUMN weekly_allowance_minor bigint NOT NULL DEFAULT 0;
        CREATE TABLE relay_rejected (
            id text PRIMARY KEY, child_id text, reason text NOT NULL, payload text NOT NULL,
            first_seen_at timestamptz NOT NULL);
        ALTER TABLE relay_txn ADD COLUMN seq bigserial, ADD COLUMN origin text NOT NULL DEFAULT 'server';
        CREATE INDEX relay_txn_local ON relay_txn (child_id) WHERE origin = 'local-pending';
        ALTER TABLE relay_outbox ADD COLUMN local_txn_id text;
        CREATE INDEX relay_txn_child ON relay_txn (child_id, created_at DESC, seq DESC);
        ALTER TABLE relay_delivery ADD COLUMN seq bigserial;
        DROP INDEX relay_delivery_due;
        CREATE INDEX relay_delivery_due ON relay_delivery (sink, due_at, seq) WHERE state = 'pending';
        CREATE INDEX relay_delivery_child ON relay_delivery (sink, child_id, state);
        CREATE INDEX relay_delivery_first ON relay_delivery (sink, due_at, seq) WHERE state = 'pending' AND \(Delivery.firstSQL);
        ALTER TABLE relay_sink_state ALTER COLUMN disabled_reason DROP NOT NULL, ALTER COLUMN disabled_at DROP NOT NULL,
            ADD COLUMN paused_until timestamptz, ADD COLUMN failing_since timestamptz, ADD COLUMN failing_error text,
            ADD COLUMN dead_lettering boolean NOT NULL DEFAULT false;
        INSERT INTO relay_sync (key, value) SELECT 'last_catch_up', value FROM relay_sync WHERE key = 'history_taken'
            ON CONFLICT (key) DO NOTHING;
        INSERT INTO relay_sync (key, value)
            VALUES ('born_at', to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'))
            ON CONFLICT (key) DO NOTHING
        """)

    // MARK: - Hub events

    public func apply(
        _ events: [HubEvent], at now: Date = Date(), traceParents: [String?] = []
    ) throws(StoreError) -> [ApplyResult] {
        try writing { db throws(PostgresError) -> Result<[ApplyResult], StoreError> in
            do throws(PostgresError) {
                return .success(try applyBurst(db, events, at: now, traceParents: traceParents))
            } catch {
                guard error.sqlState == Self.contradicted else { throw error }
                return .failure(conflict(error.message))  // rolled back: nothing of the burst is stored
            }
        }.get()
    }

    /// The SQLSTATE this store gives the error that rolls a burst back when a transaction contradicts the cache.
    private static let contradicted = "RL001"

    private func applyBurst(
        _ db: PostgresConnection, _ events: [HubEvent], at now: Date, traceParents: [String?]
    ) throws(PostgresError) -> [ApplyResult] {
        try db.transaction { () throws(PostgresError) -> [ApplyResult] in
            var planned = 0
            var children = BurstChildren()
            let results = try events.indices.map { (i) throws(PostgresError) -> ApplyResult in
                let traceParent = i < traceParents.count ? traceParents[i] : nil
                let (result, n) = try applyOne(db, events[i], &children, now: now, traceParent: traceParent)
                planned += n
                return result
            }
            // Each child's balance written once per burst, not once per event.
            for (id, child) in children.rows where child.changed { try setBalance(db, id, child.balance, now) }
            if planned > 0 { try db.notify(Self.channel) }
            return results
        }
    }

    /// The children a burst touches, each read (and locked) once, and the balance the burst's last transaction of
    /// each left.
    private struct BurstChildren {
        var rows: [UUID: BurstChild] = [:]
        var lastStored: [UUID: Int64] = [:]
        /// The children with an item not bought yet, read with each child's lock: a burst asks the wish list only
        /// for them, as the file answers from memory (`Store.hasGoals`); a query per event was half of PostgreSQL's
        /// statements (BENCHMARKS.md, session 39).
        var withGoals: Set<UUID> = []

        mutating func load(
            _ db: PostgresConnection, _ id: UUID, via store: SharedRelayStore
        ) throws(PostgresError) -> BurstChild? {
            if let row = rows[id] { return row }
            guard let row = try store.lockedChild(db, id) else { return nil }
            let child = BurstChild(name: row.name, balance: row.balance, pending: row.pending, waiting: row.waiting)
            rows[id] = child
            if row.hasGoals { withGoals.insert(id) }
            return child
        }
    }

    /// One event's result, and how many deliveries it planned.
    private func applyOne(
        _ db: PostgresConnection, _ event: HubEvent, _ children: inout BurstChildren, now: Date, traceParent: String?
    ) throws(PostgresError) -> (ApplyResult, Int) {
        switch event {
        case .transactionCreated(let t):
            let cents: TransactionCents
            switch HubEventPolicy.keeping(t, now: now) {
            case .setAside(let row):
                let (first, planned) = try setAside(db, row, now: now, traceParent: traceParent)
                return (HubEventPolicy.rejected(row, first: first), planned)
            case .keep(let kept): cents = kept
            }
            guard let child = try children.load(db, t.childId, via: self) else {
                return (
                    .needsCatchUp(reason: "transaction \(t.id) is for child \(t.childId), who is not in the cache yet"),
                    0
                )
            }
            guard try insert(db, t, amount: cents.amount, balanceAfter: cents.balanceAfter, via: "hub", now: now) else {
                // Seen before: the same transaction, or another server's data under its id.
                if let contradiction = try contradiction(db, [t]) {
                    throw PostgresError(.statement, contradiction, sqlState: Self.contradicted)
                }
                return (.duplicate, 0)
            }
            // Our own write, echoed by the hub before its POST was answered: the server has it now.
            let echoed = child.waiting > 0 ? try dropLocalEcho(db, of: t) : 0
            let (gap, after) = HubEventPolicy.transaction(cents, child: child, echoed: echoed)
            children.rows[t.childId] = after
            children.lastStored[t.childId] = cents.balanceAfter
            let alert = HubEventPolicy.alert(t, cents: cents, name: child.name, at: now, traceParent: traceParent)
            return (
                .stored(gap: gap ? t.childId : nil),
                try plan(db, alert, now: now, childHasGoals: children.withGoals.contains(t.childId))
            )
        case .transactionCreatedId(let id):
            let known = try !db.query("SELECT 1 FROM relay_txn WHERE id = $1", [id.lowercased]).rows.isEmpty
            return (known ? .duplicate : .needsCatchUp(reason: "TransactionCreated carried only the id \(id)"), 0)
        case .balanceUpdated(let childId, let balance):
            guard let cents = Money.minorUnits(balance) else {
                let row = HubEventPolicy.setAside(balance: balance, child: childId)
                let (first, planned) = try setAside(db, row, now: now, traceParent: traceParent)
                return (HubEventPolicy.rejected(row, first: first), planned)
            }
            guard let child = try children.load(db, childId, via: self) else {
                return (.needsCatchUp(reason: "BalanceUpdated for child \(childId), who is not in the cache yet"), 0)
            }
            // The newest stored transaction's balance: the burst's own when it stored one (a transaction and its
            // balance come together), else the table's.
            var latest = children.lastStored[childId]
            if latest == nil {
                // The newest by its time, and of two at one time the one stored last (a burst's share one `now`).
                latest = try db.query(
                    """
                    SELECT balance_after_minor FROM relay_txn WHERE child_id = $1 AND origin = 'server'
                    ORDER BY created_at DESC, seq DESC LIMIT 1
                    """,
                    [childId.lowercased]
                ).scalar.flatMap { Int64($0) }
            }
            let (gap, after, previous) = HubEventPolicy.balance(cents, child: child, latest: latest)
            children.rows[childId] = after
            let alert = HubEventPolicy.alert(
                balance: cents, child: childId, name: child.name, previous: previous, at: now, traceParent: traceParent)
            return (
                .stored(gap: gap ? childId : nil),
                try plan(db, alert, now: now, childHasGoals: children.withGoals.contains(childId))
            )
        }
    }

    /// Why one of `transactions` cannot be the transaction stored under its id (nil: none): a transaction never
    /// changes on the server, so another child, amount, type or time means another server's data.
    private func contradiction(_ db: PostgresConnection, _ transactions: [Transaction]) throws(PostgresError) -> String?
    {
        guard !transactions.isEmpty else { return nil }
        let stored = try db.query(
            """
            SELECT t.id, t.child_id, t.amount_minor, t.type, extract(epoch FROM t.created_at), c.name
            FROM relay_txn t LEFT JOIN relay_child c ON c.id = t.child_id WHERE t.id = ANY($1::text[])
            """, [Self.array(transactions.map(\.id.lowercased))]
        ).rows
        guard !stored.isEmpty else { return nil }
        let byId = Dictionary(stored.map { ($0[0] ?? "", $0) }, uniquingKeysWith: { a, _ in a })
        for t in transactions {
            guard let row = byId[t.id.lowercased], let minor = row[2].flatMap({ Int64($0) }),
                let at = row[4].flatMap(Double.init)
            else { continue }
            // Stored to the microsecond; the server's time may differ below a millisecond in its text.
            let sameTime = abs(at - t.createdAt.timeIntervalSince1970) < 0.001
            guard row[1] != t.childId.lowercased || minor != t.amountCents || row[3] != t.type.rawValue || !sameTime
            else { continue }
            let name = try childRow(db, t.childId)?.name ?? t.childId.lowercased
            return ConflictText.contradiction(
                id: t.id.lowercased,
                cached: (row[5] ?? row[1] ?? "?", row[3] ?? "", minor, ISODate.string(Date(timeIntervalSince1970: at))),
                server: t, serverName: name)
        }
        return nil
    }

    /// Keeps a row from the server that cannot be stored, with the reason; the first time, a `sync.rejected` alert
    /// names it. Whether it was new, and what it planned.
    func setAside(
        _ db: PostgresConnection, _ row: RejectedRow, now: Date, traceParent: String?
    ) throws(PostgresError) -> (new: Bool, planned: Int) {
        let new =
            try db.query(
                """
                INSERT INTO relay_rejected (id, child_id, reason, payload, first_seen_at) VALUES ($1, $2, $3, $4, $5::timestamptz)
                ON CONFLICT (id) DO NOTHING
                """, [row.id, row.childId?.lowercased, row.reason, row.payload, ISODate.string(now)]
            ).affected == 1
        guard new else { return (false, 0) }
        let name = try row.childId.flatMap { (id) throws(PostgresError) in try childRow(db, id)?.name }
        return (
            true,
            try plan(
                db, HubEventPolicy.alert(setAside: row, childName: name, at: now, traceParent: traceParent), now: now)
        )
    }

    public func setSyncStatus(_ status: SyncStatus) throws(StoreError) {
        try setSyncValue("status", status.json.serialized)
    }

    public func syncStatus() throws(StoreError) -> SyncStatus? {
        try syncValue("status").flatMap { try? JSONValue(parsing: $0.utf8) }.flatMap(SyncStatus.init(json:))
    }

    // MARK: - Catch-up

    public func bindServer(_ server: ServerIdentity) throws(StoreError) -> String? {
        let known = try syncValue("server").flatMap { try? JSONValue(parsing: $0.utf8) }.map(ServerIdentity.init(json:))
        switch ServerBinding.decide(known: known, server: server) {
        case .keep:
            return nil
        case .conflict(let message):
            throw conflict(message)
        case .record(let note):
            try setSyncValue("server", server.json.serialized)
            return note
        }
    }

    public func hasCaughtUp() throws(StoreError) -> Bool {
        try syncValue("last_catch_up") != nil
    }

    public func catchUpCursor(child: UUID) throws(StoreError) -> UUID? {
        try syncValue("cursor:\(child.lowercased)").flatMap(UUID.init(uuidString:))
    }

    @discardableResult
    public func storeCaughtUp(
        children: [Child], transactions: [Transaction], rejected: [RejectedRow] = [], cursors: [UUID: UUID] = [:],
        complete: Bool = true, balancesAskedAt: Date? = nil, history: Bool = false, historyTaken: Int? = nil,
        at now: Date = Date(), traceParent: String? = nil
    ) throws(StoreError) -> Int {
        let kept = try StoreError.kept(children, path: location.description)
        return try writing { db throws(PostgresError) -> Result<Int, StoreError> in
            if let contradiction = try contradiction(db, transactions) { return .failure(conflict(contradiction)) }
            return .success(
                try db.transaction { () throws(PostgresError) -> Int in
                    var inserted = 0
                    var planned = 0
                    for k in kept {
                        try db.query(
                            """
                            INSERT INTO relay_child (id, name, last_name, weekly_allowance_minor, balance_minor, updated_at)
                            VALUES ($1, $2, $3, $4, $5, $6::timestamptz)
                            ON CONFLICT (id) DO UPDATE SET name = EXCLUDED.name, last_name = EXCLUDED.last_name,
                              weekly_allowance_minor = EXCLUDED.weekly_allowance_minor, removed_at = NULL
                            """,
                            [
                                k.child.id.lowercased, k.child.firstName, k.child.lastName, String(k.weeklyAllowance),
                                String(k.balance), ISODate.string(now),
                            ])
                    }
                    for row in rejected { planned += try setAside(db, row, now: now, traceParent: traceParent).planned }
                    let born = try db.query("SELECT value FROM relay_sync WHERE key = 'born_at'").scalar
                    for t in transactions {
                        let cents: TransactionCents
                        switch HubEventPolicy.keeping(t, now: now) {
                        case .setAside(let row):
                            planned += try setAside(db, row, now: now, traceParent: traceParent).planned
                            continue
                        case .keep(let kept): cents = kept
                        }
                        guard
                            try insert(
                                db, t, amount: cents.amount, balanceAfter: cents.balanceAfter, via: "catch-up", now: now
                            )
                        else { continue }
                        _ = try dropLocalEcho(db, of: t)  // the balances below count it once, as the server's
                        inserted += 1
                        var event = RelayEvent(
                            kind: .transactionCreated, at: now, childId: t.childId,
                            childName: try childRow(db, t.childId)?.name, transaction: t, balance: t.balanceAfter,
                            caughtUp: true)
                        // History: made before this database was, not something the relay missed while it ran.
                        event.history = history && born.map { ISODate.string(t.createdAt) < $0 } ?? true
                        event.traceParent = traceParent
                        planned += try plan(db, event, now: now)
                    }
                    if complete {
                        planned += try completeCatchUp(
                            db, kept, cursors: cursors, balancesAskedAt: balancesAskedAt, history: history,
                            historyTaken: historyTaken, now: now, traceParent: traceParent)
                    }
                    if planned > 0 { try db.notify(Self.channel) }
                    return inserted
                })
        }.get()
    }

    /// The end of a catch-up: the server's balances (a change alerted), the cursors and the time, together.
    private func completeCatchUp(
        _ db: PostgresConnection, _ kept: [KeptChild], cursors: [UUID: UUID], balancesAskedAt: Date?, history: Bool,
        historyTaken: Int?, now: Date, traceParent: String?
    ) throws(PostgresError) -> Int {
        var planned = 0
        // History only while nothing came live: a relay stopped before its first catch-up completed owes the rest.
        let live = history ? try !db.query("SELECT 1 FROM relay_txn WHERE via = 'hub' LIMIT 1").rows.isEmpty : true
        for k in kept {
            let c = k.child
            let row = try db.query(
                "SELECT extract(epoch FROM updated_at) FROM relay_child WHERE id = $1", [c.id.lowercased]
            ).rows.first
            // A balance a live event set after the question is newer than the answer.
            if let asked = balancesAskedAt, let updated = row?[0].flatMap(Double.init),
                updated > asked.timeIntervalSince1970
            {
                continue
            }
            // The server's figure wins, plus the writes still waiting here.
            guard let child = try lockedChild(db, c.id) else { continue }
            let server = k.balance
            try setBalance(db, c.id, server + child.pending, now)
            let cached = child.balance - child.pending
            if row != nil, cached != server {
                var event = RelayEvent(
                    kind: .balanceUpdated, at: now, childId: c.id, childName: c.firstName, balance: c.currentBalance,
                    previousBalance: Money.decimal(cents: cached), caughtUp: true)
                event.history = history && !live
                event.traceParent = traceParent
                planned += try plan(db, event, now: now)
            }
        }
        for (child, newest) in cursors { try setSyncValue(db, "cursor:\(child.lowercased)", newest.lowercased) }
        try setSyncValue(db, "last_catch_up", ISODate.string(now))
        if let historyTaken { try setSyncValue(db, "history", "\(historyTaken) \(ISODate.string(now))") }
        return planned
    }

    public func hasTransactions(child: UUID, storedBefore date: Date) throws(StoreError) -> Bool {
        try writing { db throws(PostgresError) -> Bool in
            try !db.query(
                "SELECT 1 FROM relay_txn WHERE child_id = $1 AND origin = 'server' AND stored_at < $2::timestamptz LIMIT 1",
                [child.lowercased, ISODate.string(date)]
            ).rows.isEmpty
        }
    }

    public func conflict(_ message: String) -> StoreError {
        StoreError(path: location.description, message, code: .conflict)
    }
}
