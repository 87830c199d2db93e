import Alerts
import AllowanceAPI
import Core
import Foundation
import GRDB
import StoreContract

extension Store {
    /// Applies one hub event in one SQLite transaction: its record (a transaction's row, a balance's inbox row) and
    /// the cache change land together.
    public func apply(_ event: HubEvent, at now: Date = Date()) throws(StoreError) -> ApplyResult {
        try apply([event], at: now)[0]
    }

    /// Applies hub events in order, in one SQLite transaction: one commit (one fsync) for a burst. If any fails,
    /// none is stored (the caller catches up, which fetches them again). One that contradicts the cache (another
    /// server's data) fails the burst with a `StoreError` whose `isConflict` is set. `traceParents` (tracing on):
    /// each event's W3C traceparent, which the deliveries it plans keep.
    public func apply(
        _ events: [HubEvent], at now: Date = Date(), traceParents: [String?] = []
    ) throws(StoreError) -> [ApplyResult] {
        try write { db in
            try sizeCache(db, forCommitOf: events.count)
            var children = BurstChildren(now: now)
            var results: [ApplyResult] = []
            results.reserveCapacity(events.count)
            for i in events.indices {
                let recorded = HubEventPolicy.isRecorded(
                    events[i], byPrevious: i > 0 ? events[i - 1] : nil, storedAs: results.last)
                results.append(
                    try applyOne(
                        db, events[i], children: &children, now: now,
                        traceParent: i < traceParents.count ? traceParents[i] : nil, recorded: recorded))
            }
            try children.save(db)
            return results
        }
    }

    /// `recorded`: a balance the transaction right before it records (`HubEventPolicy.isRecorded`): no inbox row.
    private func applyOne(
        _ db: Database, _ event: HubEvent, children: inout BurstChildren, now: Date, traceParent: String?,
        recorded: Bool
    ) throws -> ApplyResult {
        switch event {
        case .transactionCreated(let t):
            let cents: TransactionCents
            switch HubEventPolicy.keeping(t, now: now) {
            case .setAside(let row):
                return HubEventPolicy.rejected(row, first: try setAside(db, row, now: now, traceParent: traceParent))
            case .keep(let kept): cents = kept
            }
            guard let child = try children.load(db, t.childId) else {
                return .needsCatchUp(
                    reason: "transaction \(t.id) is for child \(t.childId), who is not in the cache yet")
            }
            let values = TransactionRowValues(t, cents: cents, storedAt: children.stamp)
            guard try Self.insert(db, t, values, via: "hub", ifNew: true) else {
                if let contradiction = try Self.contradiction(db, t) {
                    throw StoreError(path: path, contradiction, code: .conflict)
                }
                return .duplicate
            }
            children.stored(t, values)
            // Our own write, echoed by the hub before its POST was answered: the server has it now.
            let echoed = child.waiting > 0 ? try Self.dropLocalEcho(db, of: t) : 0
            let (gap, after) = HubEventPolicy.transaction(cents, child: child, echoed: echoed)
            children.update(t.childId, after)
            if try plansAny(.transactionCreated) || hasGoals(db, t.childId) {
                try planDeliveries(
                    db,
                    HubEventPolicy.alert(t, cents: cents, name: child.name, at: now, traceParent: traceParent))
            }
            return .stored(gap: gap ? t.childId : nil)
        case .transactionCreatedId(let id):
            if try Self.isStored(db, id: id) { return .duplicate }
            return .needsCatchUp(reason: "TransactionCreated carried only the id \(id)")
        case .balanceUpdated(let childId, let balance):
            guard let server = Money.minorUnits(balance) else {
                let row = HubEventPolicy.setAside(balance: balance, child: childId)
                return HubEventPolicy.rejected(row, first: try setAside(db, row, now: now, traceParent: traceParent))
            }
            guard let child = try children.load(db, childId) else {
                return .needsCatchUp(reason: "BalanceUpdated for child \(childId), who is not in the cache yet")
            }
            if !recorded { try Self.recordInbox(db, balance: event, receivedAt: children.stamp) }
            let latest = children.latestBalance(childId)
            let (gap, after, previous) = HubEventPolicy.balance(server, child: child, latest: latest)
            children.update(childId, after)
            if try plansAny(.balanceUpdated) || hasGoals(db, childId) {
                try planDeliveries(
                    db,
                    HubEventPolicy.alert(
                        balance: server, child: childId, name: child.name, previous: previous, at: now,
                        traceParent: traceParent))
            }
            return .stored(gap: gap ? childId : nil)
        }
    }

    /// Binds the cache to the server it is filled from, at the first catch-up; later, refuses another one (a
    /// `StoreError` with `isConflict`). With the account's ids a new URL for the same family is taken (returned as
    /// a note to log); without them the URL is the identity.
    public func bindServer(_ server: ServerIdentity) throws(StoreError) -> String? {
        try write { db -> String? in
            let known = try String.fetchOne(db, sql: "SELECT value FROM sync_state WHERE key = 'server'")
                .flatMap { try? JSONValue(parsing: Array($0.utf8)) }.map(ServerIdentity.init(json:))
            switch ServerBinding.decide(known: known, server: server) {
            case .keep:
                return nil
            case .conflict(let message):
                throw StoreError(path: path, message, code: .conflict)
            case .record(let note):
                try db.execute(
                    sql:
                        "INSERT INTO sync_state (key, value) VALUES ('server', ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                    arguments: [server.json.serialized])
                return note
            }
        }
    }

    /// Stores what a catch-up fetched, in one SQLite transaction: the children as the server sees them and
    /// their transactions (oldest first; known ones are skipped). A catch-up stores each page as it arrives
    /// (`complete: false`), then finishes with `complete: true`: the server's balances, the new per-child cursors
    /// and the time of the catch-up, together. Returns how many transactions were new.
    ///
    /// `balancesAskedAt`: when the request for `children` went out. A child whose balance a live event set after
    /// that keeps it: the event is at least as new as the answer (writing the answer over it left a stale
    /// balance for good when no later event came; seen under a connection reset mid-burst).
    ///
    /// `history`: this is the first catch-up of a new database (`hasCaughtUp` was false): the alerts of transactions
    /// made before the database was say so (later ones were missed while the relay ran, and are alerted as such), and
    /// the completing call records `historyTaken` transactions for `status`.
    @discardableResult
    public func storeCaughtUp(
        children: [Child], transactions: [Transaction], rejected: [RejectedRow] = [], cursors: [UUID: UUID] = [:],
        complete: Bool = true, balancesAskedAt: Date? = nil, history: Bool = false, historyTaken: Int? = nil,
        at now: Date = Date(),
        traceParent: String? = nil
    ) throws(StoreError) -> Int {
        let kept = try StoreError.kept(children, path: path)
        return try write { db -> Int in
            try Self.settleBalances(db)  // its transactions and balances change what a following balance reads
            var inserted = 0
            for k in kept { try Self.upsert(db, k, now: now) }
            for row in rejected { try setAside(db, row, now: now, traceParent: traceParent) }
            for t in transactions {
                let cents: TransactionCents
                switch HubEventPolicy.keeping(t, now: now) {
                case .setAside(let row):
                    try setAside(db, row, now: now, traceParent: traceParent)
                    continue
                case .keep(let kept): cents = kept
                }
                guard try !Self.isStored(db, id: t.id) else {
                    if let contradiction = try Self.contradiction(db, t) {
                        throw StoreError(path: path, contradiction, code: .conflict)
                    }
                    continue
                }
                _ = try Self.dropLocalEcho(db, of: t)  // the balances below count it once, as the server's
                try Self.insert(
                    db, t, TransactionRowValues(t, cents: cents, storedAt: ISO.string(now)), via: "catch-up")
                inserted += 1
                var event = RelayEvent(
                    kind: .transactionCreated, at: now, childId: t.childId,
                    childName: try Self.childName(db, t.childId), transaction: t,
                    balance: t.balanceAfter, caughtUp: true)
                event.history = try history && Self.madeBeforeTheDatabase(db, t)
                event.traceParent = traceParent
                try planDeliveries(db, event)
            }
            guard complete else { return inserted }
            // Balances last: the server's figure wins over any sum of what we hold. History only while nothing came
            // live: a relay that ran (and was stopped) before its first catch-up completed owes what changed meanwhile.
            let cameLive = try history && Self.anythingCameLive(db)
            for k in kept {
                let c = k.child
                if let asked = balancesAskedAt,
                    let updated = try String.fetchOne(
                        try db.cachedStatement(sql: "SELECT updated_at FROM child WHERE id = ?"),
                        arguments: [c.id.lowercased]),
                    updated > ISO.string(asked)
                {
                    continue
                }
                let pending = try Self.pendingEffect(db, c.id)
                let cached = try Self.childBalance(db, c.id).map { $0 - pending }
                try Self.setBalance(db, c.id, minor: k.balance + pending, updatedAt: ISO.string(now))
                if let cached, cached != k.balance {
                    var event = RelayEvent(
                        kind: .balanceUpdated, at: now, childId: c.id, childName: c.firstName,
                        balance: c.currentBalance,
                        previousBalance: Money.decimal(cents: cached), caughtUp: true)
                    event.history = history && !cameLive
                    event.traceParent = traceParent
                    try planDeliveries(db, event)
                }
            }
            for (child, newest) in cursors {
                try db.executeCached(
                    sql:
                        "INSERT INTO sync_state (key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                    arguments: ["cursor:\(child.lowercased)", newest.lowercased])
            }
            try db.executeCached(
                sql:
                    "INSERT INTO sync_state (key, value) VALUES ('last_catch_up', ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                arguments: [ISO.string(now)])
            if let historyTaken {
                try db.execute(
                    sql:
                        "INSERT INTO sync_state (key, value) VALUES ('history', ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                    arguments: ["\(historyTaken) \(ISO.string(now))"])
            }
            return inserted
        }
    }

    /// Keeps a row from the server that cannot be stored, with the reason; the first time, a `sync.rejected` alert
    /// names it. Returns whether it was new.
    @discardableResult
    func setAside(_ db: Database, _ row: RejectedRow, now: Date, traceParent: String? = nil) throws -> Bool {
        try db.executeCached(
            sql: "INSERT OR IGNORE INTO rejected (id, child_id, reason, payload, first_seen_at) VALUES (?, ?, ?, ?, ?)",
            arguments: [row.id, row.childId?.lowercased, row.reason, row.payload, ISO.string(now)])
        guard db.changesCount == 1 else { return false }
        try planDeliveries(
            db,
            HubEventPolicy.alert(
                setAside: row, childName: try row.childId.flatMap { try Self.childName(db, $0) }, at: now,
                traceParent: traceParent))
        return true
    }

    /// Rows from the server set aside, newest first.
    public func rejectedRows() throws(StoreError) -> [(id: String, childId: UUID?, reason: String, at: Date)] {
        try read { db in
            try Row.fetchAll(
                db,
                sql: "SELECT id, child_id, reason, first_seen_at FROM rejected ORDER BY first_seen_at DESC, rowid DESC"
            ).map {
                (
                    $0["id"], ($0["child_id"] as String?).flatMap(UUID.init(uuidString:)), $0["reason"],
                    ISODate.parse($0["first_seen_at"]) ?? .distantPast
                )
            }
        }
    }

    /// Whether `t` was made before this database was: history, not something the relay missed while it ran.
    static func madeBeforeTheDatabase(_ db: Database, _ t: Transaction) throws -> Bool {
        guard
            let born = try String.fetchOne(
                try db.cachedStatement(sql: "SELECT value FROM sync_state WHERE key = 'born_at'"))
        else { return true }
        return ISO.string(t.createdAt) < born
    }

    /// Whether a catch-up ever completed on this database (false: the next one reads the family's history).
    public func hasCaughtUp() throws(StoreError) -> Bool {
        try read { db in try Bool.fetchOne(db, sql: "SELECT 1 FROM sync_state WHERE key = 'last_catch_up'") ?? false }
    }

    /// What the first catch-up of this database took as history: how many transactions, and when.
    public func historyTaken() throws(StoreError) -> (transactions: Int, at: Date)? {
        try read { db in
            guard let text = try String.fetchOne(db, sql: "SELECT value FROM sync_state WHERE key = 'history'") else {
                return nil
            }
            let parts = text.split(separator: " ")
            guard parts.count == 2, let n = Int(parts[0]), let at = ISODate.parse(String(parts[1])) else { return nil }
            return (n, at)
        }
    }

    /// The newest transaction of the child's last completed catch-up.
    public func catchUpCursor(child: UUID) throws(StoreError) -> UUID? {
        try read { db in
            try String.fetchOne(
                try db.cachedStatement(sql: "SELECT value FROM sync_state WHERE key = ?"),
                arguments: ["cursor:\(child.lowercased)"]
            )
            .flatMap(UUID.init(uuidString:))
        }
    }

    public func children() throws(StoreError) -> [Child] {
        try read { db in
            try Row.fetchAll(
                db.cachedStatement(
                    sql:
                        "SELECT *, \(Self.balanceSQL) AS balance FROM child WHERE removed_at IS NULL ORDER BY first_name, id"
                )
            ).map { row in
                Child(
                    id: try Self.uuid(row, "id", of: "child"), firstName: row["first_name"], lastName: row["last_name"],
                    weeklyAllowance: Money.decimal(cents: row["weekly_allowance_minor"]),
                    currentBalance: Money.decimal(cents: row["balance"]))
            }
        }
    }

    /// The id in `column` of a row of `table`. One this version cannot read (a damaged file, a hand edit) is an error
    /// naming the table, the column and the value, not a crash.
    static func uuid(_ row: Row, _ column: String, of table: String) throws -> UUID {
        guard let id = (row[column] as String?).flatMap(UUID.init(uuidString:)) else {
            throw APIError(.invalidPayload, "\(table) row: unreadable \(column) '\(row[column] as String? ?? "")'")
        }
        return id
    }

    public func balanceTimes() throws(StoreError) -> [UUID: Date] {
        try read { db in
            var times: [UUID: Date] = [:]
            for row in try Row.fetchAll(
                db, sql: "SELECT id, \(Self.updatedAtSQL) AS updated_at FROM child WHERE removed_at IS NULL")
            {
                if let id = UUID(uuidString: row["id"]), let at = ISODate.parse(row["updated_at"]) { times[id] = at }
            }
            return times
        }
    }

    /// Transactions, newest first; a child's only, and only those created at or after `since`, when given.
    public func transactions(
        child: UUID? = nil, since: Date? = nil, limit: Int = 100
    ) throws(StoreError) -> [Transaction] {
        try read { db in
            try Row.fetchAll(
                db, sql: Self.newestTransactions(ofOneChild: child != nil, since: since != nil),
                arguments: ["child": child?.lowercased, "since": since.map(ISO.string), "limit": limit]
            ).map { row in
                guard let type = TransactionType(rawValue: row["type"]) else {
                    throw APIError(.invalidPayload, "txn row: unreadable type '\(row["type"] as String? ?? "")'")
                }
                return Transaction(
                    id: try Self.uuid(row, "id", of: "txn"), childId: try Self.uuid(row, "child_id", of: "txn"),
                    amount: Money.decimal(cents: row["amount_minor"]), type: type,
                    description: row["description"], balanceAfter: Money.decimal(cents: row["balance_after_minor"]),
                    createdAt: ISODate.parse(row["created_at"]) ?? .distantPast, createdByName: row["created_by"])
            }
        }
    }

    /// The children that have transactions, one row each (`kid.id`), found by hopping along txn_by_child from one
    /// child's range to the next: a query that reads the history in date order does so child by child, without an
    /// index on the whole history's dates to keep up with every event (schema v24).
    static let eachChildsTransactions = """
        WITH RECURSIVE kid(id) AS (
            SELECT (SELECT min(child_id) FROM txn)
            UNION ALL
            SELECT (SELECT min(child_id) FROM txn WHERE child_id > kid.id) FROM kid WHERE kid.id IS NOT NULL
        )
        """

    /// The query for the newest transactions (`:limit` of them), a child's (`:child`) or the family's, created at or
    /// after `:since` when `since`. A child's newest are the end of its range in txn_by_child; the family's are each
    /// child's newest, merged.
    static func newestTransactions(ofOneChild: Bool, since: Bool) -> String {
        let newest = """
            WHERE child_id = \(ofOneChild ? ":child" : "kid.id") \(since ? "AND created_at >= :since" : "")
            ORDER BY created_at DESC, rowid DESC LIMIT :limit
            """
        if ofOneChild { return "SELECT * FROM txn \(newest)" }
        return """
            \(eachChildsTransactions)
            SELECT txn.* FROM kid JOIN txn ON txn.rowid IN (SELECT rowid FROM txn AS mine \(newest))
            ORDER BY txn.created_at DESC, txn.rowid DESC LIMIT :limit
            """
    }

    /// The hub events kept in the inbox (those with no row of their own: BalanceUpdated), oldest first: their kinds.
    public func inbox() throws(StoreError) -> [String] {
        try read { db in try String.fetchAll(db, sql: "SELECT kind FROM inbox ORDER BY seq") }
    }
}
