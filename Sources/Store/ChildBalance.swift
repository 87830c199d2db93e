import AllowanceAPI
import Foundation
import GRDB
import StoreContract

/// A child's balance as the cache holds it: the server's balance plus the writes made here and not yet confirmed.
///
/// The hub sends a transaction with its balance after it, so in a steady stream the balance is always the newest
/// transaction's plus the writes waiting here. Writing it into the child's row as well was a page of the child table
/// in every commit (1.00 of the soak's 6.89 pages a transaction, BENCHMARKS.md session 56). So a child's row can say
/// that its balance *follows* its newest transaction (schema v27, `balance_follows`): a burst of hub events that
/// leaves the balance there sets the flag once, and the bursts after it write nothing to the child. Its stored
/// `balance_minor` and `updated_at` are then as of the write that set the flag, and every reader takes the balance and
/// its time through `balanceSQL` and `updatedAtSQL`.
///
/// Only a hub burst leaves a child following (`BurstChildren.save`). Every other write that changes a balance or a
/// child's transactions (a catch-up, the outbox, the prune) first writes the followed balance into the row
/// (`settleBalances`), then works on the row as it always has.
extension Store {
    /// The child's newest server transaction, as `txn_by_child` gives it (a tie of dates to the later stored): the
    /// one a following balance is read from. `column` of it, for the child of the row named `child`.
    static func newest(_ column: String) -> String {
        """
        (SELECT n.\(column) FROM txn n WHERE n.child_id = child.id AND n.origin = 'server'
         ORDER BY n.created_at DESC, n.rowid DESC LIMIT 1)
        """
    }

    /// What the writes waiting here add to the balance of the child whose id is `child` (by default, of the row
    /// named `child`).
    static func pendingSQL(of child: String = "child.id") -> String {
        """
        (SELECT COALESCE(SUM(CASE p.type WHEN 'Credit' THEN p.amount_minor ELSE -p.amount_minor END), 0)
         FROM txn p WHERE p.child_id = \(child) AND p.origin = 'local-pending')
        """
    }

    /// How many writes wait here for the child of the row named `child` (one probe of an index that is empty when
    /// nothing waits).
    static let waitingSQL = "(SELECT COUNT(*) FROM txn p WHERE p.child_id = child.id AND p.origin = 'local-pending')"

    /// The balance (minor units) of the child of the row named `child`, as every reader sees it (a burst works the
    /// same out in `BurstChildren.load`, from the same reads).
    static let balanceSQL = """
        CASE WHEN child.balance_follows
            THEN coalesce(\(newest("balance_after_minor")) + \(pendingSQL()), child.balance_minor)
            ELSE child.balance_minor END
        """

    /// When a hub event or a write last set the balance of the child of the row named `child`: a following balance
    /// was set by the burst that stored its newest transaction.
    static let updatedAtSQL = """
        CASE WHEN child.balance_follows
            THEN max(child.updated_at, coalesce(\(newest("stored_at")), ''))
            ELSE child.updated_at END
        """

    static func childBalance(_ db: Database, _ id: UUID) throws -> Int64? {
        try Int64.fetchOne(
            try db.cachedStatement(sql: "SELECT \(balanceSQL) FROM child WHERE id = ?"), arguments: [id.lowercased])
    }

    /// `updatedAt`: the time as the rows say it (`ISO.string`), formatted once by a caller that writes several.
    /// `follows`: the balance is the child's newest transaction's plus the writes waiting (a hub burst's alone).
    static func setBalance(
        _ db: Database, _ id: UUID, minor: Int64, updatedAt: String, follows: Bool = false
    ) throws {
        try db.executeCached(
            sql: "UPDATE child SET balance_minor = ?, updated_at = ?, balance_follows = ? WHERE id = ?",
            values: [.integer(minor), .text(updatedAt), .integer(follows ? 1 : 0), .uuid(id)])
    }

    /// At a clean stop: each following balance written into its row, so that the file alone says every balance
    /// as it stands (to an older release, or to anyone reading the rows with sqlite3).
    public func settleBalances() throws(StoreError) {
        try write { db in try Self.settleBalances(db) }
    }

    /// Writes each following balance, and its time, into its row, which then no longer follows: done first by every
    /// write but a hub burst's that changes a balance or the transactions it is read from. Writes nothing when no
    /// child follows.
    static func settleBalances(_ db: Database) throws {
        try db.executeCached(
            sql: """
                UPDATE child SET balance_minor = \(balanceSQL), updated_at = \(updatedAtSQL), balance_follows = 0
                WHERE balance_follows
                """)
    }
}

extension Schema {
    /// v27: a child's balance can follow its newest transaction (`ChildBalance.swift`). Every row starts as it was,
    /// its balance its own.
    static func balancesThatFollowTheNewestTransaction(_ m: inout DatabaseMigrator) {
        m.registerMigration("v27: a balance that follows the newest transaction") { db in
            try db.execute(sql: "ALTER TABLE child ADD COLUMN balance_follows INTEGER NOT NULL DEFAULT 0")
        }
    }
}
