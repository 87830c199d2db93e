import Alerts
import AllowanceAPI
import Core
import Foundation
import GRDB
import GRDBSQLite
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
        let minor = try MinorUnits.from(t.amount)
        guard
            stored.child != t.childId.lowercased || stored.minor != minor || stored.type != t.type.rawValue || !sameTime
        else { return nil }
        func name(_ id: String) throws -> String {
            try String.fetchOne(
                try db.cachedStatement(sql: "SELECT first_name FROM child WHERE id = ?"), arguments: [id]) ?? id
        }
        return ConflictText.contradiction(
            id: t.id.lowercased, cached: (try name(stored.child), stored.type, stored.minor, stored.at), server: t,
            serverName: try name(t.childId.lowercased))
    }

    /// The one place a transaction row is written. `origin` is server or local-pending; `via` says how it came. A row
    /// already under its id takes the server's origin and balance; with `ifNew` it is left as it is and false is
    /// returned (the event is a repeat, found by the insert's own look-up of the id rather than one before it).
    @discardableResult
    static func insert(
        _ db: Database, _ t: Transaction, origin: String = "server", via: String, now: Date, ifNew: Bool = false
    ) throws -> Bool {
        try insert(db, t, TransactionRowValues(t, storedAt: ISO.string(now)), origin: origin, via: via, ifNew: ifNew)
    }

    /// `insert` with the row's values already worked out (the hub's path uses them again after the insert).
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

    static func upsert(_ db: Database, _ c: Child, now: Date) throws {
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
        try String.fetchOne(
            try db.cachedStatement(sql: "SELECT first_name FROM child WHERE id = ?"), arguments: [id.lowercased])
    }

    /// What the writes made here and not yet confirmed by the server add to the child's balance (minor units).
    /// The cached balance is the server's plus this: what a parent would see if every write goes through.
    static func pendingEffect(_ db: Database, _ id: UUID) throws -> Int64 {
        try pendingWrites(db, id).effect
    }

    /// The effect of the child's writes still waiting here, and how many there are (one probe of an index that is
    /// empty when nothing waits).
    static func pendingWrites(_ db: Database, _ id: UUID) throws -> (effect: Int64, count: Int) {
        try db.fetchCachedRow(
            sql: """
                SELECT COALESCE(SUM(CASE type WHEN 'Credit' THEN amount_minor ELSE -amount_minor END), 0), COUNT(*)
                FROM txn WHERE child_id = ? AND origin = 'local-pending'
                """,
            values: [.uuid(id)]
        ) { (effect: $0.int64(0) ?? 0, count: Int($0.int64(1) ?? 0)) } ?? (0, 0)
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
    let cents: (amount: Int64, balanceAfter: Int64, balanceBefore: Int64)
    let createdAt: String
    let storedAt: String

    init(_ t: Transaction, storedAt: String) throws {
        cents = try t.cents()
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
    /// Each child's newest stored server transaction, once read in this burst (nil inside: none), kept up to date as
    /// the burst stores more: a BalanceUpdated compares with it, and a blast sends one behind every transaction.
    private var newest: [UUID: NewestTransaction?] = [:]
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

    /// The balance the child's newest stored server transaction left (nil: none stored).
    mutating func latestBalance(_ db: Database, _ id: UUID) throws -> Int64? {
        try newestTransaction(db, id)?.balanceAfter
    }

    private mutating func newestTransaction(_ db: Database, _ id: UUID) throws -> NewestTransaction? {
        if let memo = newest[id] { return memo }
        let row = try db.fetchCachedRow(
            sql: """
                SELECT created_at, balance_after_minor, stored_at FROM txn
                WHERE child_id = ? AND origin = 'server' ORDER BY created_at DESC, rowid DESC LIMIT 1
                """,
            values: [.uuid(id)]
        ) { NewestTransaction(createdAt: $0.text(0) ?? "", balanceAfter: $0.int64(1) ?? 0, storedAt: $0.text(2) ?? "") }
        newest[id] = row
        return row
    }

    /// A server transaction this burst stored: the newest when it sorts at or after the one known (its row's texts
    /// compared as SQLite compares them, a tie going to the later stored as in the index). Nothing to do while the
    /// child's newest is unread: the read will find this row.
    mutating func stored(_ t: Transaction, _ values: TransactionRowValues) {
        guard let memo = newest[t.childId] else { return }
        if let known = memo, known.createdAt > values.createdAt { return }
        newest[t.childId] = NewestTransaction(
            createdAt: values.createdAt, balanceAfter: values.cents.balanceAfter, storedAt: values.storedAt)
    }

    /// The child as the cache has it (nil: not in the cache).
    mutating func load(_ db: Database, _ id: UUID) throws -> BurstChild? {
        if let child = known[id] { return child }
        guard
            let row = try db.fetchCachedRow(
                sql: "SELECT balance_minor, first_name, balance_follows FROM child WHERE id = ?",
                values: [.uuid(id)],
                { (balance: $0.int64(0) ?? 0, name: $0.text(1) ?? "", follows: $0.int64(2) == 1) })
        else { return nil }
        let (pending, waiting) = try Store.pendingWrites(db, id)
        var balance = row.balance
        if row.follows {
            // `Store.balanceSQL` worked out here from what the burst reads anyway: the newest transaction (kept for
            // the burst's balances and its save) and the writes waiting.
            following.insert(id)
            if let newest = try newestTransaction(db, id) { balance = newest.balanceAfter + pending }
        }
        let child = BurstChild(name: row.name, balance: balance, pending: pending, waiting: waiting)
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
                try newestTransaction(db, id).map {
                    $0.storedAt == stamp && $0.balanceAfter + child.pending == child.balance
                }
                ?? false
            if follows && following.contains(id) { continue }
            try Store.setBalance(db, id, minor: child.balance, updatedAt: stamp, follows: follows)
        }
    }
}

extension Database {
    /// `body` in one SQLite transaction begun by `begin` ("BEGIN IMMEDIATE TRANSACTION" for a writer, "BEGIN DEFERRED
    /// TRANSACTION" for a read), its BEGIN and COMMIT compiled once per connection: GRDB's own transactions compile
    /// both afresh each time, its authorizer building a table of what each touches. Rolled back when `body` or the
    /// COMMIT fails.
    ///
    /// BEGIN and COMMIT go straight to SQLite, as the rows do (`executeCached(sql:values:)`): GRDB's statement path
    /// around them checks for suspension (a mutex), region and observers, and dates the transaction, none of which the
    /// store uses. In a soak's profile the two took 49 of the 256 samples of the writer's Swift, 17 this way
    /// (BENCHMARKS.md, session 63). SQLite's commit hook, which GRDB installs, still runs.
    func inCachedTransaction<T>(_ begin: String, _ body: () throws -> T) throws -> T {
        try executeCached(sql: begin, values: [])
        do {
            let result = try body()
            try executeCached(sql: "COMMIT TRANSACTION", values: [])
            return result
        } catch {
            // SQLite has already rolled back after some failures (a full disk, an I/O error).
            if isInsideTransaction { try? execute(sql: "ROLLBACK TRANSACTION") }
            throw error
        }
    }

    /// Runs `sql` with a statement prepared once per connection: an event is several statements, and preparing
    /// them each time was a third of the cost of storing it (measured with perf).
    func executeCached(sql: String, arguments: StatementArguments = StatementArguments()) throws {
        try cachedStatement(sql: sql).execute(arguments: arguments)
    }

    /// `executeCached(sql:arguments:)` for the rows written with every event (the transaction, the balance, the
    /// delivery, the inbox): the values go straight to SQLite. GRDB's `StatementArguments` box each value as an
    /// existential and copy it into a `DatabaseValue`, and for the delivery row's fourteen values that took as long
    /// as SQLite's insert itself in a blast (BENCHMARKS.md, session 44). A failure is GRDB's `DatabaseError`, as from
    /// any statement; the statement is reset either way, ready for the next event. Returns the rows it changed
    /// (SQLite's count, asked of the statement's connection: GRDB's `changesCount` first asks libdispatch which
    /// queue runs, for every row).
    @discardableResult
    func executeCached(sql: String, values: [SQLValue]) throws -> Int {
        try withBound(sql, values) { statement in
            var code = sqlite3_step(statement)
            while code == SQLITE_ROW { code = sqlite3_step(statement) }
            guard code == SQLITE_DONE else { throw SQLValue.failure(code, statement, sql) }
            return Int(sqlite3_changes(sqlite3_db_handle(statement)))
        }
    }

    /// The first column of the first row `sql` reads (nil: no row, or NULL), its values bound as
    /// `executeCached(sql:values:)` binds them: the reads made for every event (a child's latest balance, a rule's
    /// look for the same alert).
    func fetchCachedInt64(sql: String, values: [SQLValue]) throws -> Int64? {
        try fetchCachedRow(sql: sql, values: values) { $0.int64(0) } ?? nil
    }

    /// What `read` makes of the first row `sql` reads (nil: no row), its values bound as `executeCached(sql:values:)`
    /// binds them.
    func fetchCachedRow<T>(sql: String, values: [SQLValue], _ read: (BoundRow) throws -> T) throws -> T? {
        try withBound(sql, values) { statement in
            switch sqlite3_step(statement) {
            case SQLITE_ROW: try read(BoundRow(statement: statement))
            case SQLITE_DONE: nil
            case let code: throw SQLValue.failure(code, statement, sql)
            }
        }
    }

    /// Runs `body` on the cached statement of `sql` with `values` bound; resets it afterwards, whatever happened.
    private func withBound<T>(_ sql: String, _ values: [SQLValue], _ body: (SQLiteStatement) throws -> T) throws -> T {
        let cached = try cachedStatement(sql: sql)  // the cache keeps it, and so the SQLite statement, alive
        return try withExtendedLifetime(cached) {
            let statement = cached.sqliteStatement
            let parameters = Int(sqlite3_bind_parameter_count(statement))
            guard parameters == values.count else {
                throw DatabaseError(message: "\(values.count) values for \(parameters) parameters", sql: sql)
            }
            do {
                return try values.withUnsafeBufferPointer { values in
                    try Self.bind(values, from: 0, statement, sql) {
                        // Reset and cleared while the texts are still lent: the statement keeps no pointer to them.
                        defer {
                            sqlite3_reset(statement)
                            sqlite3_clear_bindings(statement)
                        }
                        return try body(statement)
                    }
                }
            } catch {
                sqlite3_reset(statement)  // a value SQLite refused: nothing ran
                sqlite3_clear_bindings(statement)
                throw error
            }
        }
    }

    /// Binds `values` in order, then runs `run` with every one still bound. A text is lent to SQLite as it is
    /// (SQLITE_STATIC), for as long as `run` runs: a copy (SQLITE_TRANSIENT) was a malloc, a copy and a free of each
    /// text of each row, about a twentieth of a blast's CPU (BENCHMARKS.md, session 55). The text still ends at its
    /// first NUL, as GRDB binds it.
    private static func bind<T>(
        _ values: UnsafeBufferPointer<SQLValue>, from start: Int, _ statement: SQLiteStatement, _ sql: String,
        then run: () throws -> T
    ) throws -> T {
        var offset = start
        while offset < values.count {
            let index = Int32(offset + 1)
            let next = offset + 1
            switch values[offset] {
            case .text(let text?):
                // withCString lends a native string's own bytes; passing the String itself made a copy of them.
                return try text.withCString { chars in
                    try SQLValue.check(sqlite3_bind_text(statement, index, chars, -1, nil), statement, sql)
                    return try bind(values, from: next, statement, sql, then: run)
                }
            case .uuid(let id?):
                return try id.withLowercasedUTF8 { bytes in
                    try bindBytes(bytes, index, values, from: next, statement, sql, then: run)
                }
            case .date(let date?):
                return try ISODate.withUTF8(date) { bytes in
                    try bindBytes(bytes, index, values, from: next, statement, sql, then: run)
                }
            case .integer(let number?): try SQLValue.check(sqlite3_bind_int64(statement, index, number), statement, sql)
            case .text(nil), .integer(nil), .uuid(nil), .date(nil):
                try SQLValue.check(sqlite3_bind_null(statement, index), statement, sql)
            }
            offset = next
        }
        return try run()
    }

    /// Binds text lent as `bytes` at `index` (they stay lent while the rest is bound and `run` runs), then the rest.
    private static func bindBytes<T>(
        _ bytes: UnsafeBufferPointer<UInt8>, _ index: Int32, _ values: UnsafeBufferPointer<SQLValue>,
        from next: Int, _ statement: SQLiteStatement, _ sql: String, then run: () throws -> T
    ) throws -> T {
        let code = bytes.withMemoryRebound(to: CChar.self) {
            sqlite3_bind_text(statement, index, $0.baseAddress, Int32($0.count), nil)
        }
        try SQLValue.check(code, statement, sql)
        return try bind(values, from: next, statement, sql, then: run)
    }
}

/// A value for `Database.executeCached(sql:values:)`: text or an integer, nil for NULL. An id or a time is bound as
/// its text (lower case; `ISODate.string`) written on the stack: a String made for each was an allocation and a free
/// for every id and time of every row an event writes.
enum SQLValue {
    case text(String?)
    case integer(Int64?)
    case uuid(UUID?)
    case date(Date?)

    /// The same value for a statement GRDB runs (a read that builds a record from its row).
    var databaseValue: DatabaseValue {
        switch self {
        case .text(let text): text?.databaseValue ?? .null
        case .integer(let number): number?.databaseValue ?? .null
        case .uuid(let id): id?.lowercased.databaseValue ?? .null
        case .date(let date): date.map(ISO.string)?.databaseValue ?? .null
        }
    }

    fileprivate static func check(_ code: Int32, _ statement: OpaquePointer, _ sql: String) throws {
        guard code == SQLITE_OK else { throw failure(code, statement, sql) }
    }

    /// The error as GRDB words it: the result code (extended, as GRDB asks of every connection), SQLite's message.
    fileprivate static func failure(_ code: Int32, _ statement: OpaquePointer, _ sql: String) -> DatabaseError {
        DatabaseError(
            resultCode: ResultCode(rawValue: code),
            message: String(cString: sqlite3_errmsg(sqlite3_db_handle(statement))),
            sql: sql)
    }
}

/// The row a bound statement stands on, read by column (from 0): valid only inside `fetchCachedRow`'s `read`.
struct BoundRow {
    fileprivate let statement: OpaquePointer

    /// nil for NULL; SQLite's conversion for another type.
    func int64(_ column: Int32) -> Int64? {
        sqlite3_column_type(statement, column) == SQLITE_NULL ? nil : sqlite3_column_int64(statement, column)
    }

    /// nil for NULL; SQLite's conversion (to UTF-8) for another type.
    func text(_ column: Int32) -> String? {
        guard let bytes = sqlite3_column_text(statement, column) else { return nil }
        return String(cString: bytes)
    }
}

enum ISO {
    static func string(_ date: Date) -> String { ISODate.string(date) }
}
