import Foundation
import GRDB
import StoreContract

/// How the SQLite ledger finds a delivery by its id without an index of ids (schema v25). A delivery's id is
/// `dlv_` and a version 7 UUID, whose first 64 bits (milliseconds, version, a count within the millisecond) differ from
/// one id to the next and grow with time. The row is stored under those bits as its row id (`id_number`): a new row goes
/// at the table's end, and a look-up by id is a look-up by row id. One more B-tree written with every alert, the id's
/// own index, is gone (BENCHMARKS.md, session 53).
///
/// Rows numbered otherwise are "set aside" below `setAsideBelow`, under a small index of their ids: the rows from before
/// v25 (their old row ids), an id of another form, and a number already taken (another process's id made in the same
/// millisecond with the same count). A look-up tries the number, then that index (`keyCondition`).
extension Delivery {
    /// Numbers below this are set aside. A version 7 id's number is its millisecond times 65,536 and more: above this
    /// for any time after 1970's first five hours.
    static let setAsideBelow: Int64 = 1 << 40

    /// The row id of a delivery with `id`: the id's first 64 bits; nil for an id of another form.
    static func number(of id: String) -> Int64? {
        // dlv_, then xxxxxxxx-xxxx-7xxx: 8 + 1 + 4 + 1 + 4 characters, 16 hexadecimal digits. Read from the string's
        // own bytes: through `utf8.dropFirst(4).prefix(18)` a call took twice as long (84 ns against 41, `swiftc -O`).
        var id = id
        return id.withUTF8 { b -> Int64? in
            guard b.count >= 22, b[0] == UInt8(ascii: "d"), b[1] == UInt8(ascii: "l"), b[2] == UInt8(ascii: "v"),
                b[3] == UInt8(ascii: "_")
            else { return nil }
            var value: UInt64 = 0
            for index in 0..<18 {
                let c = b[4 + index]
                if index == 8 || index == 13 {
                    guard c == UInt8(ascii: "-") else { return nil }
                    continue
                }
                guard let digit = hexDigit(c), index != 14 || digit == 7 else { return nil }  // version 7
                value = value << 4 | digit
            }
            guard value < 1 << 63, Int64(value) >= setAsideBelow else { return nil }
            return Int64(value)
        }
    }

    private static func hexDigit(_ c: UInt8) -> UInt64? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): UInt64(c - UInt8(ascii: "0"))
        case UInt8(ascii: "a")...UInt8(ascii: "f"): UInt64(c - UInt8(ascii: "a") + 10)
        default: nil
        }
    }

    /// The condition that finds one delivery by id: under its number, or else set aside. The row id is worked out
    /// first, in two look-ups SQLite evaluates once (the second only when the first finds nothing), so that an update
    /// by id reads and writes one row in one pass. Written as `id = ? AND (id_number = ? OR ...)`, SQLite took both
    /// paths and merged them, and each outcome's update built a temporary table (BENCHMARKS.md, session 55). The
    /// bound (a literal) is the set-aside index's own condition, so that SQLite answers the second look-up from it.
    static let keyCondition = """
        id_number = coalesce(
            (SELECT id_number FROM delivery WHERE id_number = ? AND id = ?),
            (SELECT id_number FROM delivery WHERE id = ? AND id_number < \(setAsideBelow)))
        """

    /// The values `keyCondition` binds for `id`.
    static func keyValues(_ id: String) -> [SQLValue] {
        [.integer(number(of: id) ?? 0), .text(id), .text(id)]
    }

    /// Marks the waiting delivery `id` merged into `into` (a newer message, or a digest).
    static func merge(_ db: Database, _ id: String, into: String) throws {
        try db.executeCached(
            sql:
                "UPDATE delivery SET state = ?, merged_into = ? WHERE \(keyCondition) AND state IN \(State.waitingSQL)",
            values: [.text(State.merged.rawValue), .text(into)] + keyValues(id))
    }

    private static let columns = """
        id, sink, rule, kind, child_id, urgency, alert, digest, dedup_key, state, next_attempt_at, last_error,
        created_at, trace_parent
        """

    // Made once: an SQL text built for each row was an allocation and a copy of it with every alert, before the
    // statement cache hashed it.
    private static let insertNumbered = """
        INSERT INTO delivery (id_number, \(columns)) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
        ON CONFLICT (id_number) DO NOTHING
        """
    private static let insertSetAside = """
        INSERT INTO delivery (id_number, \(columns))
        VALUES ((SELECT ifnull(max(id_number), 0) + 1 FROM delivery WHERE id_number < \(setAsideBelow)),
                ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
        """

    /// Writes a planned row (created at `createdAt`, under `dedupKey`) under its id's number, or set aside when the
    /// id has none or its number is taken.
    static func insert(_ db: Database, _ d: Delivery, dedupKey: String?, createdAt: Date) throws {
        let number = number(of: d.id)
        var values: [SQLValue] = [
            .integer(number), .text(d.id), .text(d.sink), .text(d.rule), .text(d.kind.rawValue),
            .uuid(d.childId), .text(d.urgency.rawValue), .text(d.alert), .integer(d.digest ? 1 : 0),
            .text(dedupKey), .text(d.state.rawValue), .date(d.nextAttemptAt), .text(d.lastError), .date(createdAt),
            .text(d.traceParent),
        ]
        if number != nil {
            if try db.executeCached(sql: insertNumbered, values: values) > 0 { return }
        }
        values.removeFirst()
        try db.executeCached(sql: insertSetAside, values: values)
    }
}
