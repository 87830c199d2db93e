import AllowanceAPI
import Foundation
import GRDB

/// What one catch-up read of a child's history, for the check that the server still has what the cache holds.
///
/// The Allowance Tracker API has no way to edit or delete a transaction (its only delete is a whole child,
/// `DELETE /api/v1/children/{id}`): a transaction the server once sent and no longer has was lost on the server's
/// side (a backend restored from an older backup), never changed by a parent. A child missing from the server's list
/// was deleted on purpose and is told apart (`markRemoved`).
public struct ReadWindow: Sendable {
    public var child: UUID
    /// The newest transaction of the child's last completed catch-up, which paging went down to (nil: none yet).
    public var cursor: UUID?
    /// Whether paging met the cursor; when it did not, the whole history was read and the cursor is not in it.
    public var cursorFound = false
    /// The ids the server sent, lower-cased.
    public var seen: Set<String> = []
    /// The oldest and newest creation times among the transactions the server sent.
    public var oldest: Date?
    public var newest: Date?

    public init(child: UUID, cursor: UUID?) {
        self.child = child
        self.cursor = cursor
    }

    public mutating func saw(_ t: Transaction) {
        oldest = min(oldest ?? t.createdAt, t.createdAt)
        newest = max(newest ?? t.createdAt, t.createdAt)
    }
}

extension Store {
    /// Why the server's answer for `window` shows it lost transactions the cache holds (nil: it did not): the cursor
    /// is no longer in the child's history, or a cached transaction created inside the range the server sent is
    /// missing from it. Only transactions the server confirmed count (not local writes waiting in the outbox).
    public func lostOnServer(_ windows: [ReadWindow]) throws(StoreError) -> String? {
        try read { db -> String? in
            var described: [String] = []
            for window in windows { described += try Self.lost(db, window) }
            guard !described.isEmpty else { return nil }
            let named = described.prefix(3).joined(separator: "; ")
            let more = described.count > 3 ? " and \(described.count - 3) more" : ""
            return "The server no longer has \(described.count == 1 ? "a transaction" : "\(described.count) transactions") the cache holds: \(named)\(more). "
                + "The Allowance Tracker API cannot delete a transaction, so the backend lost data (restored from an older backup?). "
                + CacheConflict.fix
        }
    }

    /// The transactions `window` shows the server lost, described, oldest last.
    private static func lost(_ db: Database, _ window: ReadWindow) throws -> [String] {
        let child = window.child.lowercased
        let cursorAt = try window.cursor.flatMap {
            try String.fetchOne(db, sql: "SELECT created_at FROM txn WHERE id = ?", arguments: [$0.lowercased])
        }
        let candidates: [Row]
        if let cursor = window.cursor, !window.cursorFound {
            // Paging never met the cursor, so the whole history was read: every transaction the cache had from the server
            // up to the cursor must be in it. (Newer ones came live, and may be newer than the pages: the balance check
            // covers them.)
            guard let cursorAt else {  // pruned here: its id is all there is to show
                return ["transaction \(cursor.lowercased) (the newest the last catch-up saw for this child)"]
            }
            candidates = try Row.fetchAll(
                db, sql: "\(describedTransaction) WHERE child_id = ? AND origin = 'server' AND created_at <= ? ORDER BY created_at DESC",
                arguments: [child, cursorAt])
        } else if let newest = window.newest {
            // Strictly inside what was read: a transaction created as the first page was read sorts at its edge and is
            // read on the next catch-up; one at the cursor's instant may sort below it.
            let lower = [window.oldest.map(ISO.string), cursorAt].compactMap { $0 }.min() ?? ISO.string(newest)
            candidates = try Row.fetchAll(
                db,
                sql: "\(describedTransaction) WHERE child_id = ? AND origin = 'server' AND created_at > ? AND created_at < ? ORDER BY created_at DESC",
                arguments: [child, lower, ISO.string(newest)])
        } else {
            return []
        }
        // The cursor itself is never among `seen`: it is on the server exactly when paging met it.
        let onServer = { (id: String) in window.seen.contains(id) || window.cursorFound && id == window.cursor?.lowercased }
        return candidates.filter { !onServer($0["id"]) }.map(describe)
    }

    /// The children whose balance on the server is not the `balanceAfter` of their newest cached transaction (as the
    /// server confirmed it), as evidence lines; empty when every balance adds up. A child with no cached transaction
    /// has nothing to compare. Children whose balance a live event set after `askedAt` are skipped: the event is newer.
    public func balanceMismatches(_ children: [Child], askedAt: Date) throws(StoreError) -> [String] {
        try read { db -> [String] in
            var lines: [String] = []
            for c in children {
                if let updated = try String.fetchOne(db, sql: "SELECT updated_at FROM child WHERE id = ?", arguments: [c.id.lowercased]),
                    updated > ISO.string(askedAt)
                {
                    continue
                }
                // Every transaction at the newest instant: two in one millisecond have no order between them.
                let newest = try Row.fetchAll(
                    db,
                    sql: """
                        \(Self.describedTransaction) WHERE child_id = ?1 AND origin = 'server' AND created_at =
                            (SELECT MAX(created_at) FROM txn WHERE child_id = ?1 AND origin = 'server')
                        """,
                    arguments: [c.id.lowercased])
                guard !newest.isEmpty else { continue }
                let server = try MinorUnits.from(c.currentBalance)
                guard !newest.contains(where: { ($0["balance_after_minor"] as Int64) == server }) else { continue }
                let after = newest[0]["balance_after_minor"] as Int64
                lines.append(
                    "\(c.firstName)'s balance on the server is \(Money.plain(c.currentBalance)), but the newest cached transaction "
                        + "(\(Self.describe(newest[0]))) left it at \(Money.plain(cents: after))")
            }
            return lines
        }
    }

    /// The evidence of a balance that does not add up, as a conflict message.
    public static func balanceConflict(_ lines: [String]) -> String {
        "The server's balances do not add up with the transactions the cache holds: " + lines.joined(separator: "; ")
            + ". Transactions the cache holds are missing on the server, or the server changed a balance without a transaction. "
            + CacheConflict.fix
    }

    /// Marks as removed the children the cache knows that are not in the server's list (deleted with the API's
    /// `DELETE /api/v1/children/{id}`), and returns them. Their rows stay, for history; `children()` no longer lists
    /// them. A child listed again is taken back by the next catch-up.
    @discardableResult
    public func markRemoved(keeping listed: [Child], at now: Date = Date()) throws(StoreError) -> [Child] {
        let gone = try children().filter { c in !listed.contains { $0.id == c.id } }
        guard !gone.isEmpty else { return [] }
        try write { db in
            for c in gone {
                try db.execute(sql: "UPDATE child SET removed_at = ? WHERE id = ?", arguments: [ISO.string(now), c.id.lowercased])
            }
        }
        return gone
    }

    static let describedTransaction = "SELECT id, child_id, amount_minor, type, balance_after_minor, created_at, (SELECT first_name FROM child WHERE child.id = txn.child_id) AS name FROM txn"

    /// "Alice +5.00 at 2026-11-23T08:00:00.000Z (id …)".
    static func describe(_ row: Row) -> String {
        let sign = (row["type"] as String) == TransactionType.credit.rawValue ? "+" : "-"
        let name = (row["name"] as String?) ?? (row["child_id"] as String)
        return "\(name) \(sign)\(Money.plain(cents: row["amount_minor"])) at \(row["created_at"] as String) (id \(row["id"] as String))"
    }

    /// A conflict found outside a write (the catch-up's checks), as the error the sync engine acts on.
    public func conflict(_ message: String) -> StoreError {
        var error = StoreError(path: path, message)
        error.isConflict = true
        return error
    }
}
