import AllowanceAPI
import Foundation
import GRDB
import GRDBSQLite

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
