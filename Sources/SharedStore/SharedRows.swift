import AllowanceAPI
import Core
import Foundation
import PostgresTransport
import StoreContract

/// The cache's rows on PostgreSQL, written and read inside the callers' transactions: the one place each is written.
extension SharedRelayStore {
    /// A transaction with what describes it: id, child, amount, type, balance after, time, the child's name.
    static let describedTransaction = """
        SELECT t.id, t.child_id, t.amount_minor, t.type, t.balance_after_minor, extract(epoch FROM t.created_at),
               (SELECT name FROM relay_child c WHERE c.id = t.child_id)
        FROM relay_txn t
        """

    /// "Alice +5.00 at 2026-11-23T08:00:00.000Z (id …)", from a row of `describedTransaction`.
    static func describe(_ row: [String?]) -> String {
        ConflictText.transaction(
            name: row[6] ?? row[1] ?? "?", type: row[3] ?? "", amountMinor: row[2].flatMap { Int64($0) } ?? 0,
            at: row[5].flatMap(Double.init).map { ISODate.string(Date(timeIntervalSince1970: $0)) } ?? "?",
            id: row[0] ?? "?")
    }

    func childRow(_ db: PostgresConnection, _ id: UUID) throws(PostgresError) -> (name: String, balance: Int64)? {
        let rows = try db.query("SELECT name, balance_minor FROM relay_child WHERE id = $1", [id.lowercased])
        guard let row = rows.rows.first else { return nil }
        return (row[0] ?? "", Int64(row[1] ?? "") ?? 0)
    }

    /// A child as a write to its balance needs it, its row locked until the caller's transaction ends (the link
    /// holder's writer and any replica's outbox change one child's balance one at a time): its name, its balance
    /// (the server's plus the writes made here and not yet confirmed), and those writes' effect and number; and
    /// whether it has an item on its wish list not bought yet. That last is exact until the transaction ends:
    /// a wish list is written holding the same lock (`storeWishList`).
    func lockedChild(
        _ db: PostgresConnection, _ id: UUID
    ) throws(PostgresError) -> (name: String, balance: Int64, pending: Int64, waiting: Int, hasGoals: Bool)? {
        guard
            let row = try db.query(
                """
                SELECT c.name, c.balance_minor,
                  coalesce((SELECT sum(CASE t.type WHEN 'Credit' THEN t.amount_minor ELSE -t.amount_minor END) FROM relay_txn t
                            WHERE t.child_id = c.id AND t.origin = 'local-pending'), 0),
                  (SELECT count(*) FROM relay_txn t WHERE t.child_id = c.id AND t.origin = 'local-pending'),
                  EXISTS (SELECT 1 FROM relay_wish_item w WHERE w.child_id = c.id AND NOT w.purchased)
                FROM relay_child c WHERE c.id = $1 FOR UPDATE OF c
                """, [id.lowercased]
            ).rows.first
        else { return nil }
        return (
            row[0] ?? "", Int64(row[1] ?? "") ?? 0, Int64(row[2] ?? "") ?? 0, Int(row[3] ?? "") ?? 0, row[4] == "t"
        )
    }

    /// When `t` is the server's copy of a write being sent right now (the hub can push it before the POST is
    /// answered), removes the local stand-in and returns its effect on the balance; otherwise 0.
    func dropLocalEcho(_ db: PostgresConnection, of t: Transaction) throws(PostgresError) -> Int64 {
        guard let minor = t.amountCents else { return 0 }
        let dropped = try db.query(
            """
            DELETE FROM relay_txn WHERE id = (
              SELECT t.id FROM relay_txn t JOIN relay_outbox o ON o.local_txn_id = t.id
              WHERE o.state = 'in_flight' AND t.origin = 'local-pending' AND t.child_id = $1 AND t.amount_minor = $2
                AND t.type = $3 AND t.description = $4
              ORDER BY o.seq LIMIT 1)
            """, [t.childId.lowercased, String(minor), t.type.rawValue, t.description]
        ).affected
        return dropped == 0 ? 0 : t.type == .credit ? minor : -minor
    }

    func setBalance(
        _ db: PostgresConnection, _ child: UUID, _ minor: Int64, _ now: Date
    ) throws(PostgresError) {
        try db.query(
            "UPDATE relay_child SET balance_minor = $2, updated_at = $3::timestamptz WHERE id = $1",
            [child.lowercased, String(minor), ISODate.string(now)])
    }

    func setSyncValue(_ db: PostgresConnection, _ key: String, _ value: String) throws(PostgresError) {
        try db.query(
            "INSERT INTO relay_sync (key, value) VALUES ($1, $2) ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
            [key, value])
    }

    /// True when the transaction was new. `amount` and `balanceAfter`: its figures in cents, as kept
    /// (`HubEventPolicy.keeping` for the server's, the checked write for a stand-in made here).
    func insert(
        _ db: PostgresConnection, _ t: Transaction, amount: Int64, balanceAfter: Int64, via: String,
        origin: String = "server", now: Date
    ) throws(PostgresError) -> Bool {
        try db.query(
            """
            INSERT INTO relay_txn (id, child_id, amount_minor, type, description, balance_after_minor, created_at,
                                   created_by, via, stored_at, origin)
            VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10::timestamptz, $11) ON CONFLICT (id) DO NOTHING
            """,
            [
                t.id.lowercased, t.childId.lowercased, String(amount), t.type.rawValue, t.description,
                String(balanceAfter), ISODate.string(t.createdAt), t.createdByName, via,
                ISODate.string(now),
                origin,
            ]
        ).affected == 1
    }
}
