import Alerts
import AllowanceAPI
import Core
import Foundation
import GRDB
import StoreContract

extension Store {
    /// Everything `status` shows. It counts the transactions (20 ms at a million with the file cached, most of a
    /// cold `status`): a count kept by triggers made it constant and cost the relay 5-11% more CPU per event stored
    /// (BENCHMARKS.md, session 21), which a command a person runs now and then is not worth. The daemon reads
    /// `contact`, `outboxWaiting` and `fileBytes` instead.
    public func summary() throws(StoreError) -> StoreSummary {
        try read { db in
            let contact = try Self.contact(db)
            return StoreSummary(
                path: path, fileBytes: fileBytes, migrations: try Schema.migrator.appliedMigrations(db),
                children: try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM child WHERE removed_at IS NULL") ?? 0,
                transactions: try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM txn") ?? 0,
                inboxRows: try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM inbox") ?? 0,
                outboxWaiting: try JobQueue<OutboxEntry>.waitingCount(db),
                outboxRejected: try Int.fetchOne(
                    db, sql: "SELECT COUNT(*) FROM outbox WHERE state IN (?, ?)",
                    arguments: [OutboxEntry.State.rejected, OutboxEntry.State.dead]) ?? 0,
                lastCatchUp: contact.lastCatchUp, lastEvent: contact.lastEvent, lastContact: contact.lastContact)
        }
    }

    /// The last catch-up, the last hub event and the last contact: a few rows read, whatever the history.
    public func contact() throws(StoreError) -> StoreContact {
        try read { db in try Self.contact(db) }
    }

    private static func contact(_ db: Database) throws -> StoreContact {
        let lastCatchUp = try String.fetchOne(db, sql: "SELECT value FROM sync_state WHERE key = 'last_catch_up'")
            .flatMap(ISODate.parse)
        // The newest rows in the order they were stored in (seq, rowid), read from the end. The inbox holds only live
        // events; a transaction's row says how it came, the live one looked for among the last 1,000 stored (read on
        // each metrics scrape: after a long catch-up with the hub away, not the whole history each time).
        let lastBalance = try String.fetchOne(db, sql: "SELECT received_at FROM inbox ORDER BY seq DESC LIMIT 1")
        let lastLive = try String.fetchOne(
            db,
            sql: """
                SELECT stored_at FROM (SELECT rowid AS r, stored_at, received_via FROM txn ORDER BY rowid DESC LIMIT 1000)
                WHERE received_via = 'hub' ORDER BY r DESC LIMIT 1
                """)
        // Any row from the server (a catch-up's page too, before the catch-up completes), not a write made here.
        let lastFromServer = try String.fetchOne(
            db, sql: "SELECT stored_at FROM txn WHERE received_via <> 'local' ORDER BY rowid DESC LIMIT 1")
        let lastEvent = [lastBalance, lastLive].compactMap { $0.flatMap(ISODate.parse) }.max()
        let lastReceived = [lastBalance, lastFromServer].compactMap { $0.flatMap(ISODate.parse) }.max()
        return StoreContact(
            lastCatchUp: lastCatchUp, lastEvent: lastEvent,
            lastContact: [lastCatchUp, lastReceived].compactMap { $0 }.max())
    }

    /// Writes waiting to be sent (pending or in flight).
    public func outboxWaiting() throws(StoreError) -> Int {
        try read { db in try JobQueue<OutboxEntry>.waitingCount(db) }
    }

    /// The write-ahead log's size on disk (checkpointed and emptied on a schedule and at a clean stop).
    public var walBytes: Int64 {
        (try? FileManager.default.attributesOfItem(atPath: path + "-wal")[.size] as? NSNumber)?.int64Value ?? 0
    }

    /// The database's size on disk, its log included.
    public var fileBytes: Int64 {
        ["", "-wal"].reduce(Int64(0)) { sum, suffix in
            let size = (try? FileManager.default.attributesOfItem(atPath: path + suffix)[.size] as? NSNumber)?
                .int64Value
            return sum + (size ?? 0)
        }
    }
}

extension Store {
    /// Synced transactions created before `?`, found child by child in txn_by_child.
    static let pruneTransactions = """
        DELETE FROM txn WHERE rowid IN (
            \(eachChildsTransactions)
            SELECT txn.rowid FROM kid JOIN txn ON child_id = kid.id AND created_at < ? WHERE origin = 'server')
        """

    /// Retention: inbox rows (balances as they came) older than `inboxDays`, and, when `transactionDays` is set,
    /// synced transactions older than that. Local writes still waiting are never pruned. Returns what was deleted.
    @discardableResult
    public func prune(
        inboxDays: Int = 7, transactionDays: Int? = nil, now: Date = Date()
    ) throws(StoreError) -> (inbox: Int, transactions: Int) {
        try write { db in
            let inboxCutoff = ISO.string(now.addingTimeInterval(-Double(inboxDays) * 86400))
            // Rows are stored in seq order, so the old ones are the first ones: read from the start up to the first
            // recent row (as many rows as go, not the whole inbox), and delete what is before it.
            try db.execute(
                sql: """
                    DELETE FROM inbox WHERE seq < coalesce(
                        (SELECT seq FROM inbox WHERE received_at >= ? ORDER BY seq LIMIT 1), (SELECT max(seq) + 1 FROM inbox))
                    """, arguments: [inboxCutoff])
            let inbox = db.changesCount
            // mutes that have ended
            try db.execute(sql: "DELETE FROM mute WHERE until <= ?", arguments: [ISO.string(now)])
            var transactions = 0
            if let transactionDays {
                let cutoff = ISO.string(now.addingTimeInterval(-Double(transactionDays) * 86400))
                try Self.settleBalances(db)  // a following balance may be read from a transaction pruned here
                try db.execute(sql: Self.pruneTransactions, arguments: [cutoff])
                transactions = db.changesCount
            }
            return (inbox, transactions)
        }
    }
}
