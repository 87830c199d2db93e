import GRDB
import StoreContract

extension Schema {
    /// v26: the two indexes every event writes hold only what their readers ask for (BENCHMARKS.md, session 54).
    /// - `delivery_due` holds the deliveries still owed, not every delivery ever made. The claim reads it with
    ///   `state IN ('pending', 'in_flight')`, the same term as the index's (SQLite uses a partial index only then).
    ///   A delivered row leaves the index, so it stays a page or two, and no delivered row has to be kept in it.
    ///   `delivery_dead` finds the dead letters the same way, for `/metrics`; no alert sent enters it.
    /// - `txn_by_child` drops `stored_at`. The newest-first readers break a tie of `created_at` by the row id, which
    ///   grows as rows are stored: the order `stored_at` gave, without its 24 bytes in every entry.
    static func indexesOfWhatIsRead(_ m: inout DatabaseMigrator) {
        m.registerMigration("v26: the indexes each event writes hold only what is read") { db in
            try db.execute(
                sql: """
                    DROP INDEX delivery_due;
                    CREATE INDEX delivery_due ON delivery (sink, next_attempt_at) WHERE state IN \(Delivery.State.waitingSQL);
                    CREATE INDEX delivery_dead ON delivery (sink) WHERE state = '\(Delivery.State.dead.rawValue)';
                    DROP INDEX txn_by_child;
                    CREATE INDEX txn_by_child ON txn (child_id, created_at);
                    """)
        }
    }
}
