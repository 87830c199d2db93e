import Alerts
import AllowanceAPI
import Core
import Foundation
import GRDB
import StoreContract

/// The cache's rows, written and read inside the callers' transactions: the one place each is written.
extension Store {
    /// A BalanceUpdated as it came (the event as JSON): its only record, in arrival order. Not unique by content (the
    /// same balance can come twice): every one is kept. A transaction has no inbox row: its row in `txn` is its
    /// record, and its insert finds a repeat (`insert(ifNew:)`); nor has the balance right behind it that only
    /// repeats its balance after (`HubEventPolicy.isRecorded`).
    /// `receivedAt`: the burst's time as the rows say it (`BurstChildren.stamp`).
    static func recordInbox(_ db: Database, balance event: HubEvent, receivedAt: String) throws {
        try db.executeCached(
            sql: "INSERT INTO inbox (kind, payload, received_at) VALUES ('BalanceUpdated', ?, ?)",
            values: [.text(event.jsonText), .text(receivedAt)])
    }

    /// Whether any event came over the hub (a balance, or a transaction stored as it came): asked once at the end of a
    /// first catch-up, where it may read what that catch-up stored.
    static func anythingCameLive(_ db: Database) throws -> Bool {
        try Bool.fetchOne(db, sql: "SELECT 1 FROM inbox LIMIT 1") == true
            || Bool.fetchOne(db, sql: "SELECT 1 FROM txn WHERE received_via = 'hub' LIMIT 1") == true
    }

    /// Whether the server's transaction `id` is stored already (its event is a repeat). The id is the primary key
    /// of `txn`, so this is one look-up; a local write waiting in the outbox has an id of its own.
    static func isStored(_ db: Database, id: UUID) throws -> Bool {
        try Bool.fetchOne(try db.cachedStatement(sql: "SELECT 1 FROM txn WHERE id = ?"), arguments: [id.lowercased])
            == true
    }

    /// Why `t` cannot be the transaction stored under its id (nil: it is the same one). A transaction never
    /// changes on the server, so another child, amount, type or time means another server's data.
    static func contradiction(_ db: Database, _ t: Transaction) throws -> String? {
        guard
            let row = try Row.fetchOne(
                try db.cachedStatement(
                    sql: "SELECT child_id, amount_minor, type, created_at, description FROM txn WHERE id = ?"),
                arguments: [t.id.lowercased])
        else { return nil }  // pruned, or a local write's id: nothing to compare
        let stored = (
            child: row["child_id"] as String, minor: row["amount_minor"] as Int64, type: row["type"] as String,
            at: row["created_at"] as String
        )
        // Stored to the millisecond (truncated), so the same instant may differ below a millisecond.
        let sameTime = ISODate.parse(stored.at).map { abs($0.timeIntervalSince(t.createdAt)) < 0.001 } ?? false
        guard
            stored.child != t.childId.lowercased || stored.minor != t.amountCents || stored.type != t.type.rawValue
                || !sameTime
        else { return nil }
        func name(_ id: String) throws -> String {
            try String.fetchOne(
                try db.cachedStatement(sql: "SELECT first_name FROM child WHERE id = ?"), arguments: [id]) ?? id
        }
        return ConflictText.contradiction(
            id: t.id.lowercased, cached: (try name(stored.child), stored.type, stored.minor, stored.at), server: t,
            serverName: try name(t.childId.lowercased))
    }

    /// The one place a transaction row is written, from its figures in cents: a server transaction's as kept
    /// (`HubEventPolicy.keeping`; the hub's path uses them again after the insert), a write's stand-in's as its checked
    /// write worked them out. `origin` is server or local-pending; `via` says how it came. A row already under its id
    /// takes the server's origin and balance; with `ifNew` it is left as it is and false is returned (the event is a
    /// repeat, found by the insert's own look-up of the id rather than one before it).
    @discardableResult
    static func insert(
        _ db: Database, _ t: Transaction, _ values: TransactionRowValues, origin: String = "server", via: String,
        ifNew: Bool = false
    ) throws -> Bool {
        try db.executeCached(
            sql: ifNew ? insertIfNewSQL : insertOrUpdateSQL,
            values: [
                .uuid(t.id), .uuid(t.childId), .integer(values.cents.amount),
                .text(t.type.rawValue), .text(t.description), .integer(values.cents.balanceAfter),
                .text(values.createdAt),
                .text(t.createdByName), .text(origin), .text(via), .text(values.storedAt),
            ]) > 0
    }

    private static let insertIfNewSQL = insertSQL + " NOTHING"
    private static let insertOrUpdateSQL =
        insertSQL + " UPDATE SET origin = excluded.origin, balance_after_minor = excluded.balance_after_minor"
    private static let insertSQL = """
        INSERT INTO txn (id, child_id, amount_minor, type, description, balance_after_minor, created_at, created_by,
                         origin, received_via, stored_at)
        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
        ON CONFLICT(id) DO
        """

    static func upsert(_ db: Database, _ k: KeptChild, now: Date) throws {
        try db.executeCached(
            sql: """
                INSERT INTO child (id, first_name, last_name, weekly_allowance_minor, balance_minor, updated_at)
                VALUES (?, ?, ?, ?, ?, ?)
                ON CONFLICT(id) DO UPDATE SET first_name = excluded.first_name, last_name = excluded.last_name,
                    weekly_allowance_minor = excluded.weekly_allowance_minor, removed_at = NULL
                """,
            arguments: [
                k.child.id.lowercased, k.child.firstName, k.child.lastName, k.weeklyAllowance, k.balance,
                ISO.string(now),
            ])
    }

    static func childName(_ db: Database, _ id: UUID) throws -> String? {
        try String.fetchOne(
            try db.cachedStatement(sql: "SELECT first_name FROM child WHERE id = ?"), arguments: [id.lowercased])
    }

    /// What the writes made here and not yet confirmed by the server add to the child's balance (minor units).
    /// The cached balance is the server's plus this: what a parent would see if every write goes through.
    static func pendingEffect(_ db: Database, _ id: UUID) throws -> Int64 {
        try db.fetchCachedInt64(sql: pendingEffectSQL, values: [.uuid(id)]) ?? 0
    }

    /// Built once: the statement cache finds it by its text, for each child a catch-up or a confirmed write settles.
    private static let pendingEffectSQL = "SELECT \(pendingSQL(of: "?"))"

    /// When `t` is the server's copy of the write being sent right now (the hub can push it before the POST is
    /// answered), removes the local stand-in and returns its effect on the balance; otherwise 0. Only the write
    /// in flight can match: writes are sent one at a time, and a pending one has not reached the server.
    static func dropLocalEcho(_ db: Database, of t: Transaction) throws -> Int64 {
        guard let minor = t.amountCents,  // a write queued here is in whole cents
            let local = try String.fetchOne(
                try db.cachedStatement(
                    sql: """
                        SELECT t.id FROM txn t JOIN outbox o ON o.local_txn_id = t.id
                        WHERE o.state = ? AND t.origin = 'local-pending' AND t.child_id = ? AND t.amount_minor = ?
                            AND t.type = ? AND t.description = ?
                        ORDER BY o.seq LIMIT 1
                        """),
                arguments: [OutboxEntry.State.inFlight, t.childId.lowercased, minor, t.type.rawValue, t.description])
        else { return 0 }
        try db.executeCached(sql: "DELETE FROM txn WHERE id = ?", arguments: [local])
        return t.type == .credit ? minor : -minor
    }
}

/// What a transaction's row holds beyond the transaction's own texts: its amounts in minor units and its two times as
/// the row says them, each worked out once.
struct TransactionRowValues {
    let cents: TransactionCents
    let createdAt: String
    let storedAt: String

    /// `cents`: a server transaction's as `HubEventPolicy.keeping` checked them, or a stand-in's as its write did.
    init(_ t: Transaction, cents: TransactionCents, storedAt: String) {
        self.cents = cents
        createdAt = ISO.string(t.createdAt)
        self.storedAt = storedAt
    }
}

/// The children a burst of hub events touches, each read once (balance, name, writes still waiting) and its
/// balance written once at the end of the burst, not once per event; not at all when it follows the child's newest
/// transaction, as it did before the burst (`ChildBalance.swift`).
struct BurstChildren {
    private var known: [UUID: BurstChild] = [:]
    /// The children whose row says their balance follows their newest transaction.
    private var following: Set<UUID> = []
    /// Each loaded child's newest stored server transaction (absent: none), read with the child and kept up to date
    /// as the burst stores more: a BalanceUpdated compares with it, and a blast sends one behind every transaction.
    private var newest: [UUID: NewestTransaction] = [:]
    /// When the burst is stored, as its rows say it (`stored_at`, `received_at`, `updated_at`): formatted once.
    let stamp: String

    init(now: Date) {
        stamp = ISO.string(now)
    }

    /// Where a transaction sorts among a child's (created_at, then the later stored: the order of `txn_by_child`
    /// read backwards, its row ids growing as rows are stored), the balance it left, and when it was stored.
    struct NewestTransaction {
        var createdAt: String
        var balanceAfter: Int64
        var storedAt: String
    }

    /// The balance the newest stored server transaction of a child `load` found left (nil: none stored).
    func latestBalance(_ id: UUID) -> Int64? {
        newest[id]?.balanceAfter
    }

    /// A server transaction this burst stored for a loaded child: the newest when it sorts at or after the one known
    /// (its row's texts compared as SQLite compares them, a tie going to the later stored as in the index).
    mutating func stored(_ t: Transaction, _ values: TransactionRowValues) {
        if let known = newest[t.childId], known.createdAt > values.createdAt { return }
        newest[t.childId] = NewestTransaction(
            createdAt: values.createdAt, balanceAfter: values.cents.balanceAfter, storedAt: values.storedAt)
    }

    /// The child's row, the writes waiting for it, and its newest server transaction, read as `Store.balanceSQL`
    /// reads them, in one statement: three, each bound, stepped and reset, were a third of the statements of a soak's
    /// transaction.
    private static let loadSQL = """
        SELECT child.balance_minor, child.first_name, child.balance_follows, \(Store.pendingSQL()), \(Store.waitingSQL),
            newest.created_at, newest.balance_after_minor, newest.stored_at
        FROM child LEFT JOIN txn newest ON newest.rowid = \(Store.newest("rowid"))
        WHERE child.id = ?
        """

    /// The child as the cache has it (nil: not in the cache).
    mutating func load(_ db: Database, _ id: UUID) throws -> BurstChild? {
        if let child = known[id] { return child }
        guard
            let row = try db.fetchCachedRow(
                sql: Self.loadSQL, values: [.uuid(id)],
                { r in
                    (
                        balance: r.int64(0) ?? 0, name: r.text(1) ?? "", follows: r.int64(2) == 1,
                        pending: r.int64(3) ?? 0, waiting: Int(r.int64(4) ?? 0),
                        // `created_at` is NOT NULL: NULL here says no server transaction was joined.
                        newest: r.text(5).map { created in
                            NewestTransaction(
                                createdAt: created, balanceAfter: r.int64(6) ?? 0, storedAt: r.text(7) ?? "")
                        }
                    )
                })
        else { return nil }
        newest[id] = row.newest
        var balance = row.balance
        if row.follows {
            // `Store.balanceSQL`, worked out from what the read brought (the newest is kept for the burst's save).
            following.insert(id)
            if let newest = row.newest { balance = newest.balanceAfter + row.pending }
        }
        let child = BurstChild(name: row.name, balance: balance, pending: row.pending, waiting: row.waiting)
        known[id] = child
        return child
    }

    mutating func update(_ id: UUID, _ child: BurstChild) {
        known[id] = child
    }

    /// Writes each balance the burst changed. One that the burst left at its child's newest transaction (stored by
    /// this burst, so that its time is the burst's too) plus the writes waiting, follows it: nothing to write when
    /// the row already follows.
    mutating func save(_ db: Database) throws {
        for (id, child) in known where child.changed {
            let follows =
                newest[id].map { $0.storedAt == stamp && $0.balanceAfter + child.pending == child.balance }
                ?? false
            if follows && following.contains(id) { continue }
            try Store.setBalance(db, id, minor: child.balance, updatedAt: stamp, follows: follows)
        }
    }
}

enum ISO {
    static func string(_ date: Date) -> String { ISODate.string(date) }
}
