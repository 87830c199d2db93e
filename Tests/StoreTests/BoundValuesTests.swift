import Foundation
import GRDB
import GRDBSQLite
import Testing

@testable import Store

/// The per-event rows bind their values straight to SQLite (`executeCached(sql:values:)`): what goes in is what a
/// plain SQLite read gives back, NULL included; a refused row is GRDB's `DatabaseError` with SQLite's codes, and the
/// statement works again for the next event.
@Suite struct BoundValuesTests {
    static let insert = "INSERT INTO t (name, amount, note) VALUES (?, ?, ?)"

    func table() throws -> DatabaseQueue {
        let db = try DatabaseQueue()
        try db.write {
            try $0.execute(sql: "CREATE TABLE t (name TEXT NOT NULL, amount INTEGER CHECK (amount > 0), note TEXT)")
        }
        return db
    }

    /// Each row as SQLite's C interface reads it back: (name, amount or nil, note or nil, the note's type).
    func rows(_ queue: DatabaseQueue) throws -> [(String, Int64?, String?, Int32)] {
        try queue.read { db in
            let select = try db.makeStatement(sql: "SELECT name, amount, note FROM t ORDER BY rowid")
            let statement = select.sqliteStatement
            defer { withExtendedLifetime(select) {} }
            var rows: [(String, Int64?, String?, Int32)] = []
            while sqlite3_step(statement) == SQLITE_ROW {
                let amount = sqlite3_column_type(statement, 1) == SQLITE_NULL ? nil : sqlite3_column_int64(statement, 1)
                let note = sqlite3_column_text(statement, 2).map { String(cString: $0) }
                rows.append(
                    (
                        String(cString: sqlite3_column_text(statement, 0)), amount, note,
                        sqlite3_column_type(statement, 2)
                    ))
            }
            return rows
        }
    }

    @Test func textIntegersAndNullsArriveAsGiven() throws {
        let queue = try table()
        try queue.write { db in
            try db.executeCached(sql: Self.insert, values: [.text("Alice 🍦 «ok»"), .integer(2516), .text(nil)])
            try db.executeCached(sql: Self.insert, values: [.text(""), .integer(nil), .text("a \"quoted\" note")])
            try db.executeCached(sql: Self.insert, values: [.text("big"), .integer(Int64.max), .text("x")])
        }
        let rows = try rows(queue)
        #expect(rows.count == 3)
        #expect(rows[0].0 == "Alice 🍦 «ok»" && rows[0].1 == 2516 && rows[0].2 == nil && rows[0].3 == SQLITE_NULL)
        #expect(rows[1].0 == "" && rows[1].1 == nil && rows[1].2 == "a \"quoted\" note" && rows[1].3 == SQLITE_TEXT)
        #expect(rows[2].1 == Int64.max)
    }

    /// Texts are lent to SQLite without a copy while the statement runs: a short one (kept inside the String), long
    /// ones, one bridged from Foundation and one cut from another arrive whole, each in its own column, row after row
    /// through the same statement. A text with a NUL ends there, as GRDB binds it.
    @Test func textsOfEveryKindArriveWholeRowAfterRowThroughOneStatement() throws {
        let queue = try table()
        let long = String(repeating: "a long note ", count: 50)
        let bridged = NSString(string: "bridged from Foundation, longer than fifteen bytes") as String
        let cut = String("[[cut out of a longer string]]".dropFirst(2).dropLast(2))
        try queue.write { db in
            try db.executeCached(sql: Self.insert, values: [.text("short"), .integer(1), .text(long)])
            try db.executeCached(sql: Self.insert, values: [.text(bridged), .integer(2), .text(cut)])
            try db.executeCached(sql: Self.insert, values: [.text("before\0after"), .integer(3), .text(nil)])
            for n in 4..<104 {
                try db.executeCached(
                    sql: Self.insert, values: [.text("row \(n) " + long), .integer(Int64(n)), .text("\(n)")])
            }
        }
        let rows = try rows(queue)
        #expect(rows.count == 103)
        #expect(rows[0].0 == "short" && rows[0].2 == long)
        #expect(
            rows[1].0 == "bridged from Foundation, longer than fifteen bytes"
                && rows[1].2 == "cut out of a longer string")
        #expect(rows[2].2 == nil && rows[2].3 == SQLITE_NULL)
        for (n, row) in rows.dropFirst(3).enumerated() {
            #expect(row.0 == "row \(n + 4) " + long && row.1 == Int64(n + 4) && row.2 == "\(n + 4)")
        }
        let cutAtNUL = try queue.read { try String.fetchOne($0, sql: "SELECT hex(name) FROM t WHERE amount = 3") }
        #expect(cutAtNUL == "6265666F7265")  // "before"
    }

    /// An id and a time are bound as their texts, written on the stack for the bind: lower case, and
    /// `…T08:00:00.123Z` (Foundation's text for a time before 1970), nil as NULL; row after row through one statement,
    /// beside lent Strings, each text whole in its own column.
    @Test func idsAndTimesArriveAsTheirTexts() throws {
        let queue = try table()
        let id = UUID(uuidString: "E621E1F8-C36C-495A-93FC-0C247A3E6E5F")!
        let time = Date(timeIntervalSince1970: 1_795_420_800.123)  // 2026-11-23T08:00:00.123Z
        try queue.write { db in
            try db.executeCached(sql: Self.insert, values: [.uuid(id), .integer(1), .date(time)])
            try db.executeCached(
                sql: Self.insert, values: [.date(Date(timeIntervalSince1970: -1.5)), .integer(2), .uuid(nil)])
            try db.executeCached(sql: Self.insert, values: [.text("t"), .integer(3), .date(nil)])
            for n in 4..<54 {
                let row: [SQLValue] =
                    n.isMultiple(of: 2)
                    ? [.uuid(id), .integer(Int64(n)), .text("note \(n)")]
                    : [.text("row \(n)"), .integer(Int64(n)), .date(time.addingTimeInterval(Double(n)))]
                try db.executeCached(sql: Self.insert, values: row)
            }
        }
        let rows = try rows(queue)
        #expect(rows.count == 53)
        #expect(rows[0].0 == "e621e1f8-c36c-495a-93fc-0c247a3e6e5f" && rows[0].2 == "2026-11-23T08:00:00.123Z")
        #expect(rows[1].0 == "1969-12-31T23:59:58.500Z" && rows[1].2 == nil && rows[1].3 == SQLITE_NULL)
        #expect(rows[2].2 == nil && rows[2].3 == SQLITE_NULL)
        for (n, row) in zip(4..., rows.dropFirst(3)) {
            if n.isMultiple(of: 2) {
                #expect(row.0 == "e621e1f8-c36c-495a-93fc-0c247a3e6e5f" && row.2 == "note \(n)")
            } else {
                #expect(row.0 == "row \(n)" && row.2 == "2026-11-23T08:00:\(n < 10 ? "0" : "")\(n).123Z")
            }
        }
        // The same texts for a statement GRDB runs.
        #expect(SQLValue.uuid(id).databaseValue == "e621e1f8-c36c-495a-93fc-0c247a3e6e5f".databaseValue)
        #expect(SQLValue.date(time).databaseValue == "2026-11-23T08:00:00.123Z".databaseValue)
        #expect(SQLValue.uuid(nil).databaseValue.isNull && SQLValue.date(nil).databaseValue.isNull)
    }

    @Test func aRefusedRowIsADatabaseErrorAndTheNextRowGoesIn() throws {
        let queue = try table()
        try queue.write { db in
            let refused = #expect(throws: DatabaseError.self) {
                try db.executeCached(sql: Self.insert, values: [.text("a"), .integer(-5), .text(nil)])
            }
            #expect(refused?.resultCode == .SQLITE_CONSTRAINT)
            #expect(refused?.extendedResultCode == .SQLITE_CONSTRAINT_CHECK)
            #expect(refused?.message?.contains("CHECK constraint failed") == true)
            #expect(refused?.sql == Self.insert)
            #expect(throws: DatabaseError.self) {
                try db.executeCached(sql: Self.insert, values: [.text(nil), .integer(1), .text(nil)])  // NOT NULL
            }
            try db.executeCached(sql: Self.insert, values: [.text("b"), .integer(7), .text(nil)])
        }
        let rows = try rows(queue)
        #expect(rows.count == 1)
        #expect(rows.first?.0 == "b" && rows.first?.1 == 7 && rows.first?.2 == nil)
    }

    @Test func aReadGivesTheFirstColumnOfTheFirstRowNilForNoneOrNull() throws {
        let queue = try table()
        try queue.write { db in
            try db.execute(sql: "INSERT INTO t (name, amount) VALUES ('a', 5), ('a', 9), ('b', NULL)")
            let read = "SELECT amount FROM t WHERE name = ? ORDER BY amount DESC LIMIT 1"
            #expect(try db.fetchCachedInt64(sql: read, values: [.text("a")]) == 9)
            #expect(try db.fetchCachedInt64(sql: read, values: [.text("b")]) == nil)  // NULL
            #expect(try db.fetchCachedInt64(sql: read, values: [.text("c")]) == nil)  // no row
            // The statement was reset after each read: the same one reads again, with new values.
            #expect(try db.fetchCachedInt64(sql: read, values: [.text("a")]) == 9)
            // A failure while stepping (SQLite's integer overflow) is a DatabaseError, and the next read works.
            let overflow = #expect(throws: DatabaseError.self) {
                try db.fetchCachedInt64(sql: "SELECT abs(?)", values: [.integer(Int64.min)])
            }
            #expect(overflow?.message == "integer overflow")
            #expect(try db.fetchCachedInt64(sql: "SELECT abs(?)", values: [.integer(-3)]) == 3)
        }
    }

    /// A row read by column: text as stored (non-ASCII, empty), NULL as nil, integers, no row as nil; the rows were
    /// written by SQLite's own SQL, not through the bound values.
    @Test func aRowIsReadByColumn() throws {
        let queue = try table()
        try queue.write { db in
            try db.execute(sql: "INSERT INTO t (name, amount, note) VALUES ('Zoë 🍦', 7, ''), ('b', NULL, NULL)")
            let read = "SELECT name, amount, note FROM t WHERE name = ?"
            let first = try db.fetchCachedRow(sql: read, values: [.text("Zoë 🍦")]) {
                ($0.text(0), $0.int64(1), $0.text(2))
            }
            #expect(first?.0 == "Zoë 🍦" && first?.1 == 7 && first?.2 == "")
            let second = try db.fetchCachedRow(sql: read, values: [.text("b")]) {
                ($0.text(0), $0.int64(1), $0.text(2))
            }
            #expect(second?.0 == "b" && second?.1 == nil && second?.2 == nil)
            #expect(try db.fetchCachedRow(sql: read, values: [.text("c")]) { $0.text(0) } == nil)  // no row
            // Two aggregates of the same probe, as the pending writes read them.
            let sums = try db.fetchCachedRow(sql: "SELECT SUM(amount), COUNT(*) FROM t", values: []) {
                ($0.int64(0), $0.int64(1))
            }
            #expect(sums?.0 == 7 && sums?.1 == 2)
        }
    }

    @Test func tooFewOrTooManyValuesAreAnErrorNotACrash() throws {
        let queue = try table()
        try queue.write { db in
            let few = #expect(throws: DatabaseError.self) {
                try db.executeCached(sql: Self.insert, values: [.text("a"), .integer(1)])
            }
            #expect(few?.message == "2 values for 3 parameters")
            #expect(throws: DatabaseError.self) {
                try db.executeCached(sql: Self.insert, values: [.text("a"), .integer(1), .text(nil), .text("extra")])
            }
        }
        #expect(try rows(queue).isEmpty)
    }
}
