import GRDB
import StoreContract

extension Schema {
    /// v25: the ledger's rows numbered by their ids (`DeliveryNumbers.swift`), without the index of ids that every alert
    /// wrote (1.06 of the soak's 8.21 pages a transaction, BENCHMARKS.md session 52). The rows already there keep their
    /// row ids as numbers: all below `Delivery.setAsideBelow`, found by their ids through the set-aside index.
    static func deliveriesNumberedByTheirIds(_ m: inout DatabaseMigrator) {
        m.registerMigration("v25: deliveries numbered by their ids") { db in
            try db.execute(
                sql: """
                    CREATE TABLE delivery_new (
                        id_number INTEGER PRIMARY KEY,
                        id TEXT NOT NULL,
                        sink TEXT NOT NULL,
                        rule TEXT NOT NULL,
                        kind TEXT NOT NULL,
                        child_id TEXT,
                        urgency TEXT NOT NULL CHECK (urgency = 'low' OR urgency = 'normal' OR urgency = 'critical'),
                        alert TEXT NOT NULL,
                        digest INTEGER NOT NULL DEFAULT 0,
                        dedup_key TEXT,
                        state TEXT NOT NULL
                            CHECK (state = 'pending' OR state = 'in_flight' OR state = 'delivered' OR state = 'dead'
                                   OR state = 'merged' OR state = 'muted'),
                        attempts INTEGER NOT NULL DEFAULT 0,
                        next_attempt_at TEXT NOT NULL,
                        last_error TEXT,
                        merged_into TEXT,
                        created_at TEXT NOT NULL,
                        delivered_at TEXT,
                        trace_parent TEXT
                    );
                    INSERT INTO delivery_new (id_number, id, sink, rule, kind, child_id, urgency, alert, digest, dedup_key,
                                              state, attempts, next_attempt_at, last_error, merged_into, created_at,
                                              delivered_at, trace_parent)
                        SELECT rowid, id, sink, rule, kind, child_id, urgency, alert, digest, dedup_key, state, attempts,
                               next_attempt_at, last_error, merged_into, created_at, delivered_at, trace_parent
                        FROM delivery ORDER BY rowid;
                    DROP TABLE delivery;
                    ALTER TABLE delivery_new RENAME TO delivery;
                    CREATE INDEX delivery_due ON delivery (sink, state, next_attempt_at);
                    CREATE INDEX delivery_dedup ON delivery (sink, dedup_key, created_at) WHERE dedup_key IS NOT NULL;
                    CREATE UNIQUE INDEX delivery_set_aside ON delivery (id) WHERE id_number < \(Delivery.setAsideBelow);
                    """)
            try db.execute(
                sql:
                    "CREATE INDEX delivery_first ON delivery (sink, created_at) WHERE \(Delivery.firstSQL) AND state IN \(Delivery.State.waitingSQL)"
            )
        }
    }
}
