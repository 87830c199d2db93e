import Alerts
import AllowanceAPI
import Foundation
import GRDB
import Core

/// What applying an event did.
public enum ApplyResult: Sendable, Equatable {
    /// Stored. `gap` names a child whose cache disagrees with the event: a catch-up for it is due.
    case stored(gap: UUID?)
    /// Seen before (same transaction id): nothing changed.
    case duplicate
    /// The event cannot be stored on its own (an id-only transaction, an unknown child): catch up first.
    case needsCatchUp(reason: String)
    /// A transaction the relay cannot keep (an amount of 0, three decimals, a date in the future): set aside
    /// with the reason (`first`: for the first time) and reported; the events around it are stored.
    case rejected(reason: String, first: Bool)
}

extension Store {
    /// Applies one hub event in one SQLite transaction: the inbox row and the cache change land together.
    public func apply(_ event: HubEvent, at now: Date = Date()) throws(StoreError) -> ApplyResult {
        try apply([event], at: now)[0]
    }

    /// Applies hub events in order, in one SQLite transaction: one commit (one fsync) for a burst. If any fails,
    /// none is stored (the caller catches up, which fetches them again). One that contradicts the cache (another
    /// server's data) fails the burst with a `StoreError` whose `isConflict` is set.
    public func apply(_ events: [HubEvent], at now: Date = Date()) throws(StoreError) -> [ApplyResult] {
        try write { db in
            try sizeCache(db, forCommitOf: events.count)
            var children = BurstChildren()
            let results = try events.map { try applyOne(db, $0, children: &children, now: now) }
            try children.save(db, now: now)
            return results
        }
    }

    private func applyOne(_ db: Database, _ event: HubEvent, children: inout BurstChildren, now: Date) throws -> ApplyResult {
        switch event {
        case .transactionCreated(let t):
            if let problem = t.problem(now: now) {
                let row = RejectedRow(id: t.id.lowercased, childId: t.childId, reason: problem, payload: event.jsonText)
                return .rejected(reason: "transaction \(t.id.lowercased): \(problem)", first: try setAside(db, row, now: now))
            }
            guard var child = try children.load(db, t.childId) else {
                return .needsCatchUp(reason: "transaction \(t.id) is for child \(t.childId), who is not in the cache yet")
            }
            guard try Self.recordInbox(db, key: "TransactionCreated:\(t.id.lowercased)", event: event, caughtUp: false, now: now) else {
                if let contradiction = try Self.contradiction(db, t) { throw CacheConflict(message: contradiction) }
                return .duplicate
            }
            // The cached balance includes writes made here and not yet confirmed; the server's does not.
            let cents = try t.cents()
            let before = cents.balanceBefore
            let gap = child.balance - child.pending != before
            // Our own write, echoed by the hub before its POST was answered: the server has it now.
            if child.waiting > 0 {
                let echoed = try Self.dropLocalEcho(db, of: t)
                if echoed != 0 {
                    child.pending -= echoed
                    child.waiting -= 1
                }
            }
            try Self.insert(db, t, via: "hub", now: now)
            child.balance = cents.balanceAfter + child.pending
            children.update(t.childId, child)
            if plansAny(.transactionCreated) {
                try planDeliveries(
                    db,
                    RelayEvent(
                        kind: .transactionCreated, at: now, childId: t.childId, childName: child.name, transaction: t,
                        balance: t.balanceAfter, previousBalance: Money.decimal(cents: before)))
            }
            return .stored(gap: gap ? t.childId : nil)
        case .transactionCreatedId(let id):
            if try Bool.fetchOne(try db.cachedStatement(sql: "SELECT 1 FROM txn WHERE id = ?"), arguments: [id.lowercased]) == true {
                return .duplicate
            }
            return .needsCatchUp(reason: "TransactionCreated carried only the id \(id)")
        case .balanceUpdated(let childId, let balance):
            guard var child = try children.load(db, childId) else {
                return .needsCatchUp(reason: "BalanceUpdated for child \(childId), who is not in the cache yet")
            }
            // Not unique by content (the same balance can come twice): every one is kept, in order.
            _ = try Self.recordInbox(db, key: "BalanceUpdated:\(session)-\(sequence.add(1, ordering: .relaxed).newValue)", event: event, caughtUp: false, now: now)
            let latest = try Int64.fetchOne(
                try db.cachedStatement(
                    sql: "SELECT balance_after_minor FROM txn WHERE child_id = ? AND origin = 'server' ORDER BY created_at DESC, stored_at DESC LIMIT 1"),
                arguments: [childId.lowercased])
            let server = try MinorUnits.from(balance)
            let previous = child.balance - child.pending
            child.balance = server + child.pending  // the server's balance wins: it is calculated there
            children.update(childId, child)
            if plansAny(.balanceUpdated) {
                try planDeliveries(
                    db,
                    RelayEvent(
                        kind: .balanceUpdated, at: now, childId: childId, childName: child.name, balance: balance,
                        previousBalance: Money.decimal(cents: previous)))
            }
            return .stored(gap: latest == nil || latest == server ? nil : childId)
        }
    }

    /// Binds the cache to the server it is filled from, at the first catch-up; later, refuses another one (a
    /// `StoreError` with `isConflict`). With the account's ids a new URL for the same family is taken (returned as
    /// a note to log); without them the URL is the identity.
    public func bindServer(_ server: ServerIdentity) throws(StoreError) -> String? {
        try write { db -> String? in
            let statement = "INSERT INTO sync_state (key, value) VALUES ('server', ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value"
            guard let text = try String.fetchOne(db, sql: "SELECT value FROM sync_state WHERE key = 'server'"),
                let json = try? JSONValue(parsing: Array(text.utf8))
            else {
                try db.execute(sql: statement, arguments: [server.json.serialized])
                return nil
            }
            let known = ServerIdentity(json: json)
            if let ids = known.accountIds, let now = server.accountIds {
                guard ids == now else {
                    throw CacheConflict(
                        message: "The cache was filled for another account or family (\(ids)); the server at \(server.url) now says \(now). "
                            + CacheConflict.fix)
                }
                guard known.url != server.url else { return nil }
                try db.execute(sql: statement, arguments: [server.json.serialized])
                return "the server moved from \(known.url) to \(server.url) (same family): the cache carries on"
            }
            guard known.url == server.url else {
                throw CacheConflict(
                    message: "The cache was filled from \(known.url); the configuration now points at \(server.url). " + CacheConflict.fix)
            }
            if server.accountIds != nil { try db.execute(sql: statement, arguments: [server.json.serialized]) }
            return nil
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
        complete: Bool = true, balancesAskedAt: Date? = nil, history: Bool = false, historyTaken: Int? = nil, at now: Date = Date()
    ) throws(StoreError) -> Int {
        try write { db -> Int in
            var inserted = 0
            for c in children { try Self.upsert(db, c, now: now) }
            for row in rejected { try setAside(db, row, now: now) }
            for t in transactions {
                if let problem = t.problem(now: now) {
                    try setAside(db, RejectedRow(id: t.id.lowercased, childId: t.childId, reason: problem, payload: HubEvent.transactionCreated(t).jsonText), now: now)
                    continue
                }
                guard try Self.recordInbox(db, key: "TransactionCreated:\(t.id.lowercased)", event: .transactionCreated(t), caughtUp: true, now: now)
                else {
                    if let contradiction = try Self.contradiction(db, t) { throw CacheConflict(message: contradiction) }
                    continue
                }
                _ = try Self.dropLocalEcho(db, of: t)  // the balances below count it once, as the server's
                try Self.insert(db, t, via: "catch-up", now: now)
                inserted += 1
                var event = RelayEvent(
                    kind: .transactionCreated, at: now, childId: t.childId, childName: try Self.childName(db, t.childId), transaction: t,
                    balance: t.balanceAfter, caughtUp: true)
                event.history = try history && Self.madeBeforeTheDatabase(db, t)
                try planDeliveries(db, event)
            }
            guard complete else { return inserted }
            // Balances last: the server's figure wins over any sum of what we hold.
            for c in children {
                if let asked = balancesAskedAt,
                    let updated = try String.fetchOne(
                        try db.cachedStatement(sql: "SELECT updated_at FROM child WHERE id = ?"), arguments: [c.id.lowercased]),
                    updated > ISO.string(asked)
                {
                    continue
                }
                let pending = try Self.pendingEffect(db, c.id)
                let cached = try Self.childBalance(db, c.id).map { $0 - pending }
                try Self.setBalance(db, c.id, minor: try MinorUnits.from(c.currentBalance) + pending, now: now)
                if let cached, cached != (try MinorUnits.from(c.currentBalance)) {
                    var event = RelayEvent(
                        kind: .balanceUpdated, at: now, childId: c.id, childName: c.firstName, balance: c.currentBalance,
                        previousBalance: Money.decimal(cents: cached), caughtUp: true)
                    // History only while nothing came live: a relay that ran (and was stopped) before its first
                    // catch-up completed owes what changed meanwhile.
                    event.history = try history && !(Bool.fetchOne(db, sql: "SELECT 1 FROM inbox WHERE caught_up = 0 LIMIT 1") ?? false)
                    try planDeliveries(db, event)
                }
            }
            for (child, newest) in cursors {
                try db.executeCached(
                    sql: "INSERT INTO sync_state (key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                    arguments: ["cursor:\(child.lowercased)", newest.lowercased])
            }
            try db.executeCached(
                sql: "INSERT INTO sync_state (key, value) VALUES ('last_catch_up', ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                arguments: [ISO.string(now)])
            if let historyTaken {
                try db.execute(
                    sql: "INSERT INTO sync_state (key, value) VALUES ('history', ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                    arguments: ["\(historyTaken) \(ISO.string(now))"])
            }
            return inserted
        }
    }

    /// Keeps a row from the server that cannot be stored, with the reason; the first time, a `sync.rejected` alert
    /// names it. Returns whether it was new.
    @discardableResult
    func setAside(_ db: Database, _ row: RejectedRow, now: Date) throws -> Bool {
        try db.executeCached(
            sql: "INSERT OR IGNORE INTO rejected (id, child_id, reason, payload, first_seen_at) VALUES (?, ?, ?, ?, ?)",
            arguments: [row.id, row.childId?.lowercased, row.reason, row.payload, ISO.string(now)])
        guard db.changesCount == 1 else { return false }
        try planDeliveries(
            db,
            RelayEvent(
                kind: .syncRejected, at: now, childId: row.childId, childName: try row.childId.flatMap { try Self.childName(db, $0) },
                detail: "the server's transaction \(row.id) was not stored: \(row.reason)"))
        return true
    }

    /// Rows from the server set aside, newest first.
    public func rejectedRows() throws(StoreError) -> [(id: String, childId: UUID?, reason: String, at: Date)] {
        try read { db in
            try Row.fetchAll(db, sql: "SELECT id, child_id, reason, first_seen_at FROM rejected ORDER BY first_seen_at DESC, rowid DESC").map {
                ($0["id"], ($0["child_id"] as String?).flatMap(UUID.init(uuidString:)), $0["reason"], ISODate.parse($0["first_seen_at"]) ?? .distantPast)
            }
        }
    }

    /// Whether `t` was made before this database was: history, not something the relay missed while it ran.
    static func madeBeforeTheDatabase(_ db: Database, _ t: Transaction) throws -> Bool {
        guard let born = try String.fetchOne(try db.cachedStatement(sql: "SELECT value FROM sync_state WHERE key = 'born_at'")) else { return true }
        return ISO.string(t.createdAt) < born
    }

    /// Whether a catch-up ever completed on this database (false: the next one reads the family's history).
    public func hasCaughtUp() throws(StoreError) -> Bool {
        try read { db in try Bool.fetchOne(db, sql: "SELECT 1 FROM sync_state WHERE key = 'last_catch_up'") ?? false }
    }

    /// What the first catch-up of this database took as history: how many transactions, and when.
    public func historyTaken() throws(StoreError) -> (transactions: Int, at: Date)? {
        try read { db in
            guard let text = try String.fetchOne(db, sql: "SELECT value FROM sync_state WHERE key = 'history'") else { return nil }
            let parts = text.split(separator: " ")
            guard parts.count == 2, let n = Int(parts[0]), let at = ISODate.parse(String(parts[1])) else { return nil }
            return (n, at)
        }
    }

    /// The newest transaction of the child's last completed catch-up.
    public func catchUpCursor(child: UUID) throws(StoreError) -> UUID? {
        try read { db in
            try String.fetchOne(try db.cachedStatement(sql: "SELECT value FROM sync_state WHERE key = ?"), arguments: ["cursor:\(child.lowercased)"])
                .flatMap(UUID.init(uuidString:))
        }
    }

    public func children() throws(StoreError) -> [Child] {
        try read { db in
            try Row.fetchAll(db, sql: "SELECT * FROM child WHERE removed_at IS NULL ORDER BY first_name, id").map { row in
                Child(
                    id: UUID(uuidString: row["id"])!, firstName: row["first_name"], lastName: row["last_name"],
                    weeklyAllowance: Money.decimal(cents: row["weekly_allowance_minor"]),
                    currentBalance: Money.decimal(cents: row["balance_minor"]))
            }
        }
    }

    /// Transactions, newest first; a child's only, and only those created at or after `since`, when given.
    public func transactions(child: UUID? = nil, since: Date? = nil, limit: Int = 100) throws(StoreError) -> [Transaction] {
        try read { db in
            let filter = [child == nil ? nil : "child_id = :child", since == nil ? nil : "created_at >= :since"].compactMap { $0 }
            let clause = filter.isEmpty ? "" : "WHERE " + filter.joined(separator: " AND ")
            return try Row.fetchAll(
                db, sql: "SELECT * FROM txn \(clause) ORDER BY created_at DESC, stored_at DESC LIMIT :limit",
                arguments: ["child": child?.lowercased, "since": since.map(ISO.string), "limit": limit]
            ).map { row in
                Transaction(
                    id: UUID(uuidString: row["id"])!, childId: UUID(uuidString: row["child_id"])!,
                    amount: Money.decimal(cents: row["amount_minor"]), type: TransactionType(rawValue: row["type"])!,
                    description: row["description"], balanceAfter: Money.decimal(cents: row["balance_after_minor"]),
                    createdAt: ISODate.parse(row["created_at"]) ?? .distantPast, createdByName: row["created_by"])
            }
        }
    }

    /// Hub events and caught-up transactions recorded, oldest first: (kind, caught up?).
    public func inbox() throws(StoreError) -> [(kind: String, caughtUp: Bool)] {
        try read { db in
            try Row.fetchAll(db, sql: "SELECT kind, caught_up FROM inbox ORDER BY seq").map { ($0["kind"], $0["caught_up"]) }
        }
    }

    // MARK: - Rows

    /// Returns false when the key was recorded before (the event is a duplicate).
    private static func recordInbox(_ db: Database, key: String, event: HubEvent, caughtUp: Bool, now: Date) throws -> Bool {
        let kind = if case .balanceUpdated = event { "BalanceUpdated" } else { "TransactionCreated" }
        try db.executeCached(
            sql: "INSERT OR IGNORE INTO inbox (dedup_key, kind, payload, caught_up, received_at) VALUES (?, ?, ?, ?, ?)",
            arguments: [key, kind, event.jsonText, caughtUp, ISO.string(now)])
        return db.changesCount == 1
    }

    /// Why `t` cannot be the transaction stored under its id (nil: it is the same one). A transaction never
    /// changes on the server, so another child, amount, type or time means another server's data.
    static func contradiction(_ db: Database, _ t: Transaction) throws -> String? {
        guard
            let row = try Row.fetchOne(
                try db.cachedStatement(sql: "SELECT child_id, amount_minor, type, created_at, description FROM txn WHERE id = ?"),
                arguments: [t.id.lowercased])
        else { return nil }  // pruned, or a local write's id: nothing to compare
        let stored = (child: row["child_id"] as String, minor: row["amount_minor"] as Int64, type: row["type"] as String, at: row["created_at"] as String)
        // Stored to the millisecond (truncated), so the same instant may differ below a millisecond.
        let sameTime = ISODate.parse(stored.at).map { abs($0.timeIntervalSince(t.createdAt)) < 0.001 } ?? false
        let minor = try MinorUnits.from(t.amount)
        guard stored.child != t.childId.lowercased || stored.minor != minor || stored.type != t.type.rawValue || !sameTime else { return nil }
        func name(_ id: String) throws -> String {
            try String.fetchOne(try db.cachedStatement(sql: "SELECT first_name FROM child WHERE id = ?"), arguments: [id]) ?? id
        }
        let sign = { (type: String) in type == TransactionType.credit.rawValue ? "+" : "-" }
        let cached = "\(try name(stored.child)) \(sign(stored.type))\(Money.plain(Money.decimal(cents: stored.minor))) at \(stored.at)"
        let server = "\(try name(t.childId.lowercased)) \(sign(t.type.rawValue))\(Money.plain(t.amount)) at \(ISO.string(t.createdAt))"
        return "The server's data contradicts the cache: transaction \(t.id.lowercased) is cached as \(cached), the server now says \(server). "
            + CacheConflict.fix
    }

    /// The one place a transaction row is written. `origin` is server or local-pending; `via` says how it came.
    static func insert(_ db: Database, _ t: Transaction, origin: String = "server", via: String, now: Date) throws {
        try db.executeCached(
            sql: """
                INSERT INTO txn (id, child_id, amount_minor, type, description, balance_after_minor, created_at, created_by,
                                 origin, received_via, stored_at)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                ON CONFLICT(id) DO UPDATE SET origin = excluded.origin, balance_after_minor = excluded.balance_after_minor
                """,
            arguments: [
                t.id.lowercased, t.childId.lowercased, try t.cents().amount, t.type.rawValue, t.description,
                try t.cents().balanceAfter, ISO.string(t.createdAt), t.createdByName, origin, via, ISO.string(now),
            ])
    }

    private static func upsert(_ db: Database, _ c: Child, now: Date) throws {
        try db.executeCached(
            sql: """
                INSERT INTO child (id, first_name, last_name, weekly_allowance_minor, balance_minor, updated_at)
                VALUES (?, ?, ?, ?, ?, ?)
                ON CONFLICT(id) DO UPDATE SET first_name = excluded.first_name, last_name = excluded.last_name,
                    weekly_allowance_minor = excluded.weekly_allowance_minor, removed_at = NULL
                """,
            arguments: [
                c.id.lowercased, c.firstName, c.lastName, try MinorUnits.from(c.weeklyAllowance),
                try MinorUnits.from(c.currentBalance), ISO.string(now),
            ])
    }

    static func childName(_ db: Database, _ id: UUID) throws -> String? {
        try String.fetchOne(try db.cachedStatement(sql: "SELECT first_name FROM child WHERE id = ?"), arguments: [id.lowercased])
    }

    static func childBalance(_ db: Database, _ id: UUID) throws -> Int64? {
        try Int64.fetchOne(try db.cachedStatement(sql: "SELECT balance_minor FROM child WHERE id = ?"), arguments: [id.lowercased])
    }

    static func setBalance(_ db: Database, _ id: UUID, minor: Int64, now: Date) throws {
        try db.executeCached(
            sql: "UPDATE child SET balance_minor = ?, updated_at = ? WHERE id = ?",
            arguments: [minor, ISO.string(now), id.lowercased])
    }

    /// What the writes made here and not yet confirmed by the server add to the child's balance (minor units).
    /// The cached balance is the server's plus this: what a parent would see if every write goes through.
    static func pendingEffect(_ db: Database, _ id: UUID) throws -> Int64 {
        try pendingWrites(db, id).effect
    }

    /// The effect of the child's writes still waiting here, and how many there are (one probe of an index that is
    /// empty when nothing waits).
    static func pendingWrites(_ db: Database, _ id: UUID) throws -> (effect: Int64, count: Int) {
        let row = try Row.fetchOne(
            try db.cachedStatement(
                sql: """
                    SELECT COALESCE(SUM(CASE type WHEN 'Credit' THEN amount_minor ELSE -amount_minor END), 0), COUNT(*)
                    FROM txn WHERE child_id = ? AND origin = 'local-pending'
                    """),
            arguments: [id.lowercased])
        return (row?[0] ?? 0, row?[1] ?? 0)
    }

    /// When `t` is the server's copy of the write being sent right now (the hub can push it before the POST is
    /// answered), removes the local stand-in and returns its effect on the balance; otherwise 0. Only the write
    /// in flight can match: writes are sent one at a time, and a pending one has not reached the server.
    static func dropLocalEcho(_ db: Database, of t: Transaction) throws -> Int64 {
        let minor = try MinorUnits.from(t.amount)
        guard
            let local = try String.fetchOne(
                try db.cachedStatement(
                    sql: """
                        SELECT t.id FROM txn t JOIN outbox o ON o.local_txn_id = t.id
                        WHERE o.state = 'in_flight' AND t.origin = 'local-pending' AND t.child_id = ? AND t.amount_minor = ?
                            AND t.type = ? AND t.description = ?
                        ORDER BY o.seq LIMIT 1
                        """),
                arguments: [t.childId.lowercased, minor, t.type.rawValue, t.description])
        else { return 0 }
        try db.executeCached(sql: "DELETE FROM txn WHERE id = ?", arguments: [local])
        return t.type == .credit ? minor : -minor
    }
}

extension Transaction {
    /// The amounts in cents, or the error for one with more than two decimals.
    func cents() throws(PayloadError) -> (amount: Int64, balanceAfter: Int64, balanceBefore: Int64) {
        guard let amountCents, let balanceAfterCents else {
            throw PayloadError(message: "The amount \(amountCents == nil ? amount : balanceAfter) has more than 2 decimal places or is out of range.")
        }
        return (amountCents, balanceAfterCents, type == .credit ? balanceAfterCents - amountCents : balanceAfterCents + amountCents)
    }
}

/// The children a burst of hub events touches, each read once (balance, name, writes still waiting) and its
/// balance written once at the end of the burst, not once per event.
struct BurstChildren {
    struct Child {
        var balance: Int64
        var name: String
        /// The effect of the child's local writes not yet confirmed by the server, and how many there are.
        var pending: Int64
        var waiting: Int
        var changed = false
    }

    private var known: [UUID: Child] = [:]

    /// The child as the cache has it (nil: not in the cache).
    mutating func load(_ db: Database, _ id: UUID) throws -> Child? {
        if let child = known[id] { return child }
        guard
            let row = try Row.fetchOne(
                try db.cachedStatement(sql: "SELECT balance_minor, first_name FROM child WHERE id = ?"), arguments: [id.lowercased])
        else { return nil }
        let (pending, waiting) = try Store.pendingWrites(db, id)
        let child = Child(balance: row[0], name: row[1], pending: pending, waiting: waiting)
        known[id] = child
        return child
    }

    mutating func update(_ id: UUID, _ child: Child) {
        var child = child
        child.changed = true
        known[id] = child
    }

    func save(_ db: Database, now: Date) throws {
        for (id, child) in known where child.changed { try Store.setBalance(db, id, minor: child.balance, now: now) }
    }
}

/// Money as integer minor units (cents). Exact both ways; more than two decimals is an error, never rounded.
public enum MinorUnits {
    public static func from(_ amount: Decimal) throws(PayloadError) -> Int64 {
        guard let value = Money.minorUnits(amount) else {
            throw PayloadError(message: "The amount \(amount) has more than 2 decimal places or is out of range.")
        }
        return value
    }
}

extension Database {
    /// Runs `sql` with a statement prepared once per connection: an event is several statements, and preparing
    /// them each time was a third of the cost of storing it (measured with perf).
    func executeCached(sql: String, arguments: StatementArguments = StatementArguments()) throws {
        try cachedStatement(sql: sql).execute(arguments: arguments)
    }
}

enum ISO {
    static func string(_ date: Date) -> String { ISODate.string(date) }
}


/// What `status` shows about the cache.
public struct StoreSummary: Sendable {
    public var path: String
    public var fileBytes: Int64
    public var migrations: [String]
    public var children: Int
    public var transactions: Int
    public var inboxRows: Int
    /// Writes waiting to be sent (pending or in flight), and those given up (refused by the server, or dead).
    public var outboxWaiting: Int
    public var outboxRejected: Int
    public var lastCatchUp: Date?
    /// The last event pushed by the hub (not caught up); nil once pruned, or never.
    public var lastEvent: Date?
    /// The last time anything came from the server (a hub event or a catch-up).
    public var lastContact: Date?
}

extension Store {
    public func summary() throws(StoreError) -> StoreSummary {
        let bytes = ["", "-wal"].reduce(Int64(0)) { sum, suffix in
            let size = (try? FileManager.default.attributesOfItem(atPath: path + suffix)[.size] as? NSNumber)?.int64Value
            return sum + (size ?? 0)
        }
        return try read { db in
            let lastCatchUp = try String.fetchOne(db, sql: "SELECT value FROM sync_state WHERE key = 'last_catch_up'")
                .flatMap(ISODate.parse)
            let lastReceived = try String.fetchOne(db, sql: "SELECT MAX(received_at) FROM inbox").flatMap(ISODate.parse)
            let lastEvent = try String.fetchOne(db, sql: "SELECT MAX(received_at) FROM inbox WHERE caught_up = 0").flatMap(ISODate.parse)
            return StoreSummary(
                path: path, fileBytes: bytes, migrations: try Schema.migrator.appliedMigrations(db),
                children: try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM child WHERE removed_at IS NULL") ?? 0,
                transactions: try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM txn") ?? 0,
                inboxRows: try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM inbox") ?? 0,
                outboxWaiting: try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM outbox WHERE state IN ('pending', 'in_flight')") ?? 0,
                outboxRejected: try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM outbox WHERE state IN ('rejected', 'dead')") ?? 0,
                lastCatchUp: lastCatchUp, lastEvent: lastEvent,
                lastContact: [lastCatchUp, lastReceived].compactMap { $0 }.max())
        }
    }
}

extension Store {
    /// Retention: inbox rows (kept for deduplication) older than `inboxDays`, and, when `transactionDays` is set,
    /// synced transactions older than that. Local writes still waiting are never pruned. Returns what was deleted.
    @discardableResult
    public func prune(inboxDays: Int = 7, transactionDays: Int? = nil, now: Date = Date()) throws(StoreError) -> (inbox: Int, transactions: Int) {
        try write { db in
            let inboxCutoff = ISO.string(now.addingTimeInterval(-Double(inboxDays) * 86400))
            try db.execute(sql: "DELETE FROM inbox WHERE received_at < ?", arguments: [inboxCutoff])
            let inbox = db.changesCount
            var transactions = 0
            if let transactionDays {
                let cutoff = ISO.string(now.addingTimeInterval(-Double(transactionDays) * 86400))
                try db.execute(sql: "DELETE FROM txn WHERE origin = 'server' AND created_at < ?", arguments: [cutoff])
                transactions = db.changesCount
            }
            return (inbox, transactions)
        }
    }
}
