import AllowanceAPI
import Foundation
import GRDB
import StoreContract

extension Store {
    /// Why the server's answers for `windows` show it lost transactions the cache holds (nil: they do not): a cursor is
    /// no longer in its child's history, or a cached transaction newer than the cursor is missing from what was read.
    /// Only transactions the server confirmed count (not local writes waiting in the outbox).
    public func lostOnServer(_ windows: [ReadWindow]) throws(StoreError) -> String? {
        try read { db -> String? in
            var described: [String] = []
            for window in windows { described += try Self.lost(db, window) }
            return ConflictText.lost(described)
        }
    }

    /// Whether the cache held any of the child's transactions from the server before `date` (`stored_at`).
    public func hasTransactions(child: UUID, storedBefore date: Date) throws(StoreError) -> Bool {
        try read { db in
            try Bool.fetchOne(
                db, sql: "SELECT EXISTS (SELECT 1 FROM txn WHERE child_id = ? AND origin = 'server' AND stored_at < ?)",
                arguments: [child.lowercased, ISO.string(date)]) ?? false
        }
    }

    /// The transactions `window` shows the server lost, described, newest first. Only transactions stored before the
    /// catch-up began count: the server had each of them when its pages were read, so each one newer than the cursor
    /// (all of them, when paging never met the cursor) is in them. One stored live meanwhile may be newer than the pages.
    private static func lost(_ db: Database, _ window: ReadWindow) throws -> [String] {
        let cursorAt = try window.cursor.flatMap {
            try String.fetchOne(db, sql: "SELECT created_at FROM txn WHERE id = ?", arguments: [$0.lowercased])
        }
        var described: [String] = []
        var newerThan = ""  // the whole history
        if let cursor = window.cursor {
            if window.cursorFound {
                // A transaction at the cursor's very instant may sort below it: only strictly newer ones are read.
                newerThan = cursorAt ?? "9"
            } else if cursorAt == nil {  // pruned here: its id is all there is to show
                described.append("transaction \(cursor.lowercased) (the newest the last catch-up saw for this child)")
            }
        }
        let candidates = try Row.fetchAll(
            db,
            sql: """
                \(describedTransaction) WHERE child_id = ? AND origin = 'server' AND created_at > ? AND stored_at < ?
                ORDER BY created_at DESC
                """,
            arguments: [window.child.lowercased, newerThan, ISO.string(window.startedAt)])
        // The cursor itself is never among `seen`: it is on the server exactly when paging met it.
        let onServer = { (id: String) in
            window.seen.contains(id) || window.cursorFound && id == window.cursor?.lowercased
        }
        return described + candidates.filter { !onServer($0["id"]) }.map(describe)
    }

    /// The children whose balance on the server is not the `balanceAfter` of their newest cached transaction (as the
    /// server confirmed it); empty when every balance adds up. A child with no cached transaction has nothing to
    /// compare. Children whose balance a live event set after `askedAt` are skipped: the event is newer.
    public func balanceMismatches(_ children: [Child], askedAt: Date) throws(StoreError) -> [BalanceMismatch] {
        try read { db -> [BalanceMismatch] in
            var found: [BalanceMismatch] = []
            for c in children {
                if let updated = try String.fetchOne(
                    db, sql: "SELECT \(Self.updatedAtSQL) FROM child WHERE id = ?", arguments: [c.id.lowercased]),
                    updated > ISO.string(askedAt)
                {
                    continue
                }
                // Every transaction at the newest instant: two in one millisecond have no order between them.
                let newest = try Row.fetchAll(
                    db,
                    sql: """
                        \(Self.describedTransaction) WHERE child_id = ?1 AND origin = 'server' AND created_at = (
                            SELECT created_at FROM txn WHERE child_id = ?1 AND origin = 'server' ORDER BY created_at DESC LIMIT 1)
                        """,
                    arguments: [c.id.lowercased])
                // A balance with a third decimal is no evidence either way: the catch-up refuses that child
                // (`StoreError.kept`).
                guard !newest.isEmpty, let server = Money.minorUnits(c.currentBalance) else { continue }
                guard !newest.contains(where: { ($0["balance_after_minor"] as Int64) == server }) else { continue }
                let after = newest[0]["balance_after_minor"] as Int64
                found.append(
                    BalanceMismatch(
                        child: c.id, serverBalance: c.currentBalance, newest: newest[0]["id"],
                        evidence: ConflictText.balance(
                            child: c.firstName, server: c.currentBalance, newest: Self.describe(newest[0]),
                            leftMinor: after)))
            }
            return found
        }
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
                try db.execute(
                    sql: "UPDATE child SET removed_at = ? WHERE id = ?", arguments: [ISO.string(now), c.id.lowercased])
            }
        }
        return gone
    }

    static let describedTransaction =
        "SELECT id, child_id, amount_minor, type, balance_after_minor, created_at, (SELECT first_name FROM child WHERE child.id = txn.child_id) AS name FROM txn"

    /// "Alice +5.00 at 2026-11-23T08:00:00.000Z (id …)".
    static func describe(_ row: Row) -> String {
        ConflictText.transaction(
            name: (row["name"] as String?) ?? row["child_id"], type: row["type"], amountMinor: row["amount_minor"],
            at: row["created_at"], id: row["id"])
    }

    /// A conflict found outside a write (the catch-up's checks), as the error the sync engine acts on.
    public func conflict(_ message: String) -> StoreError {
        StoreError(path: path, message, code: .conflict)
    }
}
