import AllowanceAPI
import Foundation
import GRDB
import StoreContract

extension Schema {
    /// The migrations that make each event's write smaller: fewer rows, B-trees and pages written per transaction
    /// (issue 51; BENCHMARKS.md names the pages each one took away).
    static func registerLeanerWrites(_ m: inout DatabaseMigrator) {
        m.registerMigration("v21: the inbox without AUTOINCREMENT") { db in
            // AUTOINCREMENT keeps the largest seq ever used in sqlite_sequence: one more page written with every
            // event. Nothing keeps a seq (it orders the rows there are; retention deletes the oldest), so the rowid's
            // own next value (the largest there is, plus one) orders them as well. Rebuilt, as SQLite cannot drop it.
            try db.execute(
                sql: """
                    CREATE TABLE inbox_new (
                        seq INTEGER PRIMARY KEY,
                        dedup_key TEXT NOT NULL UNIQUE,
                        kind TEXT NOT NULL,
                        payload TEXT NOT NULL,
                        caught_up INTEGER NOT NULL DEFAULT 0,
                        received_at TEXT NOT NULL
                    );
                    INSERT INTO inbox_new (seq, dedup_key, kind, payload, caught_up, received_at)
                        SELECT seq, dedup_key, kind, payload, caught_up, received_at FROM inbox ORDER BY seq;
                    DROP TABLE inbox;
                    ALTER TABLE inbox_new RENAME TO inbox;
                    DELETE FROM sqlite_sequence WHERE name = 'inbox';
                    """)
        }
        m.registerMigration("v22: the inbox keeps what has no row of its own") { db in
            // A transaction's inbox row repeated what its row in `txn` holds (its id, under the same primary key, in the
            // same commit), and its dedup key cost each event an entry in a unique index at a random place: two of the
            // 13.5 pages each transaction wrote (BENCHMARKS.md, session 41). A repeat is now found by its row in `txn`.
            // What stays is the event with no other record, a BalanceUpdated, in arrival order; its key was unique by
            // construction (one per arrival), so the index had nothing to refuse.
            try db.execute(
                sql: """
                    CREATE TABLE inbox_new (
                        seq INTEGER PRIMARY KEY,
                        kind TEXT NOT NULL,
                        payload TEXT NOT NULL,
                        received_at TEXT NOT NULL
                    );
                    INSERT INTO inbox_new (seq, kind, payload, received_at)
                        SELECT seq, kind, payload, received_at FROM inbox WHERE kind <> 'TransactionCreated' ORDER BY seq;
                    DROP TABLE inbox;
                    ALTER TABLE inbox_new RENAME TO inbox;
                    """)
        }
        m.registerMigration("v23: the checks on each event's rows compare without a temporary index") { db in
            // SQLite checks `x IN ('a', 'b', 'c')` (three values or more) by building a temporary index of the values,
            // for every row it writes: 3 of them for each transaction stored (its row's received_via, its delivery's
            // urgency and state), 7% of the writer's time in a blast (BENCHMARKS.md, session 42). The
            // same checks written as `x = 'a' OR ...` compare in place. SQLite cannot change a CHECK: the two tables
            // written with each event are rebuilt, their rowids (the order they were stored in) kept.
            try db.execute(
                sql: """
                    CREATE TABLE txn_new (
                        id TEXT PRIMARY KEY,
                        child_id TEXT NOT NULL,
                        amount_minor INTEGER NOT NULL CHECK (amount_minor > 0),
                        type TEXT NOT NULL CHECK (type = 'Credit' OR type = 'Debit'),
                        description TEXT NOT NULL,
                        balance_after_minor INTEGER NOT NULL,
                        created_at TEXT NOT NULL,
                        created_by TEXT NOT NULL,
                        origin TEXT NOT NULL CHECK (origin = 'server' OR origin = 'local-pending'),
                        received_via TEXT NOT NULL
                            CHECK (received_via = 'hub' OR received_via = 'catch-up' OR received_via = 'local'
                                   OR received_via = 'outbox'),
                        stored_at TEXT NOT NULL
                    );
                    INSERT INTO txn_new (rowid, id, child_id, amount_minor, type, description, balance_after_minor,
                                         created_at, created_by, origin, received_via, stored_at)
                        SELECT rowid, id, child_id, amount_minor, type, description, balance_after_minor, created_at,
                               created_by, origin, received_via, stored_at FROM txn ORDER BY rowid;
                    DROP TABLE txn;
                    ALTER TABLE txn_new RENAME TO txn;
                    CREATE INDEX txn_by_child ON txn (child_id, created_at, stored_at);
                    CREATE INDEX txn_local_pending ON txn (child_id) WHERE origin = 'local-pending';
                    CREATE INDEX txn_recent ON txn (created_at, stored_at);

                    CREATE TABLE delivery_new (
                        id TEXT PRIMARY KEY,
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
                    INSERT INTO delivery_new (rowid, id, sink, rule, kind, child_id, urgency, alert, digest, dedup_key, state,
                                              attempts, next_attempt_at, last_error, merged_into, created_at, delivered_at,
                                              trace_parent)
                        SELECT rowid, id, sink, rule, kind, child_id, urgency, alert, digest, dedup_key, state, attempts,
                               next_attempt_at, last_error, merged_into, created_at, delivered_at, trace_parent
                        FROM delivery ORDER BY rowid;
                    DROP TABLE delivery;
                    ALTER TABLE delivery_new RENAME TO delivery;
                    CREATE INDEX delivery_due ON delivery (sink, state, next_attempt_at);
                    CREATE INDEX delivery_dedup ON delivery (sink, dedup_key, created_at) WHERE dedup_key IS NOT NULL;
                    """)
            try db.execute(
                sql:
                    "CREATE INDEX delivery_first ON delivery (sink, created_at) WHERE \(Delivery.firstSQL) AND state IN \(Delivery.State.waitingSQL)"
            )
        }
        m.registerMigration("v24: the newest transactions read child by child") { db in
            // txn_recent (v17) put the whole history in date order: one more B-tree page written with every
            // transaction (1.09 of the soak's 10.4, BENCHMARKS.md session 46), for a listing and a prune that
            // txn_by_child serves as well, one child's range at a time (Store.eachChildsTransactions).
            try db.execute(sql: "DROP INDEX txn_recent")
        }
        m.registerMigration("v25: a delivery's row is kept in the order of its id") { db in
            // A delivery's id is time-ordered (`UUID.timeOrdered`, in the order made within a millisecond), so the
            // table keyed by it grows at its end as the rowid did, and is its own index: the separate index on the
            // id (1.06 of the soak's 8.21 pages a transaction, BENCHMARKS.md session 52) goes. The id now breaks
            // ties of created_at where the rowid did; rows of earlier releases with the same created_at may go in
            // another order among themselves.
            try db.execute(
                sql: """
                    CREATE TABLE delivery_new (
                        id TEXT PRIMARY KEY,
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
                    ) WITHOUT ROWID;
                    INSERT INTO delivery_new (id, sink, rule, kind, child_id, urgency, alert, digest, dedup_key, state,
                                              attempts, next_attempt_at, last_error, merged_into, created_at, delivered_at,
                                              trace_parent)
                        SELECT id, sink, rule, kind, child_id, urgency, alert, digest, dedup_key, state, attempts,
                               next_attempt_at, last_error, merged_into, created_at, delivered_at, trace_parent
                        FROM delivery ORDER BY id;
                    DROP TABLE delivery;
                    ALTER TABLE delivery_new RENAME TO delivery;
                    CREATE INDEX delivery_due ON delivery (sink, state, next_attempt_at);
                    CREATE INDEX delivery_dedup ON delivery (sink, dedup_key, created_at) WHERE dedup_key IS NOT NULL;
                    """)
            try db.execute(
                sql:
                    "CREATE INDEX delivery_first ON delivery (sink, created_at) WHERE \(Delivery.firstSQL) AND state IN \(Delivery.State.waitingSQL)"
            )
        }
    }
}
