import AllowanceAPI
import Foundation
import GRDB
import StoreContract

/// The versioned schema. Migrations are append-only: a released one is never edited, a change is a new one.
enum Schema {
    static var migrator: DatabaseMigrator {
        var m = DatabaseMigrator()
        m.registerMigration("v1: children, transactions, inbox, sync state") { db in
            // Money is in minor units (cents): exact, and summable in SQL.
            try db.execute(
                sql: """
                    CREATE TABLE child (
                        id TEXT PRIMARY KEY,
                        first_name TEXT NOT NULL,
                        last_name TEXT NOT NULL,
                        weekly_allowance_minor INTEGER NOT NULL,
                        balance_minor INTEGER NOT NULL,
                        updated_at TEXT NOT NULL
                    );
                    CREATE TABLE txn (
                        id TEXT PRIMARY KEY,
                        child_id TEXT NOT NULL,
                        amount_minor INTEGER NOT NULL CHECK (amount_minor > 0),
                        type TEXT NOT NULL CHECK (type IN ('Credit', 'Debit')),
                        description TEXT NOT NULL,
                        balance_after_minor INTEGER NOT NULL,
                        created_at TEXT NOT NULL,
                        created_by TEXT NOT NULL,
                        -- server: the backend has it; local-pending: written offline, waiting in the outbox
                        origin TEXT NOT NULL CHECK (origin IN ('server', 'local-pending')),
                        -- hub: pushed live; catch-up: fetched over REST; local: written here, waiting in the outbox;
                        -- outbox: the server's answer to a write sent from the outbox
                        received_via TEXT NOT NULL CHECK (received_via IN ('hub', 'catch-up', 'local', 'outbox')),
                        stored_at TEXT NOT NULL
                    );
                    CREATE INDEX txn_by_child ON txn (child_id, created_at);
                    -- Every hub event or caught-up transaction, once (dedup_key), in arrival order (seq).
                    CREATE TABLE inbox (
                        seq INTEGER PRIMARY KEY AUTOINCREMENT,
                        dedup_key TEXT NOT NULL UNIQUE,
                        kind TEXT NOT NULL,
                        payload TEXT NOT NULL,
                        caught_up INTEGER NOT NULL DEFAULT 0,
                        received_at TEXT NOT NULL
                    );
                    CREATE TABLE sync_state (
                        key TEXT PRIMARY KEY,
                        value TEXT NOT NULL
                    );
                    """)
        }
        m.registerMigration("v2: outbox") { db in
            // Writes made here, sent in order when the backend is reachable. The idempotency key makes a resend
            // after a crash safe: the server applies it once.
            try db.execute(
                sql: """
                    CREATE TABLE outbox (
                        seq INTEGER PRIMARY KEY AUTOINCREMENT,
                        idempotency_key TEXT NOT NULL UNIQUE,
                        local_txn_id TEXT NOT NULL,
                        child_id TEXT NOT NULL,
                        amount_minor INTEGER NOT NULL CHECK (amount_minor > 0),
                        type TEXT NOT NULL CHECK (type IN ('Credit', 'Debit')),
                        description TEXT NOT NULL,
                        priority INTEGER NOT NULL DEFAULT 0,
                        state TEXT NOT NULL CHECK (state IN ('pending', 'in_flight', 'sent', 'rejected')),
                        attempts INTEGER NOT NULL DEFAULT 0,
                        next_attempt_at TEXT NOT NULL,
                        last_error TEXT,
                        created_at TEXT NOT NULL
                    );
                    CREATE INDEX outbox_due ON outbox (state, priority DESC, seq);
                    """)
        }
        m.registerMigration("v3: outbox dead letters") { db in
            // SQLite cannot change a CHECK in place: the table is rebuilt with 'dead' allowed.
            try db.execute(
                sql: """
                    CREATE TABLE outbox_v3 (
                        seq INTEGER PRIMARY KEY AUTOINCREMENT,
                        idempotency_key TEXT NOT NULL UNIQUE,
                        local_txn_id TEXT NOT NULL,
                        child_id TEXT NOT NULL,
                        amount_minor INTEGER NOT NULL CHECK (amount_minor > 0),
                        type TEXT NOT NULL CHECK (type IN ('Credit', 'Debit')),
                        description TEXT NOT NULL,
                        priority INTEGER NOT NULL DEFAULT 0,
                        -- rejected: the server refused it (4xx); dead: given up after too many attempts or too long
                        state TEXT NOT NULL CHECK (state IN ('pending', 'in_flight', 'sent', 'rejected', 'dead')),
                        attempts INTEGER NOT NULL DEFAULT 0,
                        next_attempt_at TEXT NOT NULL,
                        last_error TEXT,
                        created_at TEXT NOT NULL
                    );
                    INSERT INTO outbox_v3 SELECT * FROM outbox;
                    DROP TABLE outbox;
                    ALTER TABLE outbox_v3 RENAME TO outbox;
                    CREATE INDEX outbox_due ON outbox (state, priority DESC, seq);
                    """)
        }
        m.registerMigration("v4: delivery ledger") { db in
            // One row per (alert, sink), written in the same SQLite transaction as the event that caused it.
            // The id is stable across retries: the webhook-id, the Matrix txnId, the receiver's idempotency key.
            try db.execute(
                sql: """
                    CREATE TABLE delivery (
                        id TEXT PRIMARY KEY,
                        sink TEXT NOT NULL,
                        rule TEXT NOT NULL,
                        kind TEXT NOT NULL,
                        child_id TEXT,
                        urgency TEXT NOT NULL CHECK (urgency IN ('low', 'normal', 'critical')),
                        -- the event as JSON; rendered with the sink's template when sent
                        alert TEXT NOT NULL,
                        -- may be folded with others of the same child into one digest
                        digest INTEGER NOT NULL DEFAULT 0,
                        dedup_key TEXT,
                        -- merged: folded into the digest named by merged_into
                        state TEXT NOT NULL CHECK (state IN ('pending', 'in_flight', 'delivered', 'dead', 'merged')),
                        attempts INTEGER NOT NULL DEFAULT 0,
                        next_attempt_at TEXT NOT NULL,
                        last_error TEXT,
                        merged_into TEXT,
                        created_at TEXT NOT NULL,
                        delivered_at TEXT
                    );
                    CREATE INDEX delivery_due ON delivery (sink, state, next_attempt_at);
                    CREATE INDEX delivery_dedup ON delivery (sink, dedup_key, created_at);
                    -- A sink the server told us is gone (410, Discord's unknown webhook): no sends until re-enabled.
                    CREATE TABLE sink_state (
                        sink TEXT PRIMARY KEY,
                        disabled_reason TEXT,
                        disabled_at TEXT
                    );
                    """)
        }
        m.registerMigration("v5: latest transaction per child by index") { db in
            // BalanceUpdated compares with the child's latest transaction (ORDER BY created_at DESC, stored_at DESC):
            // with only (child_id, created_at) SQLite sorted all of the child's rows for each event, so storing
            // slowed down as the table grew (measured: 287 events/s over 100,000). Read backwards, this index
            // answers it at once.
            try db.execute(
                sql: """
                    DROP INDEX txn_by_child;
                    CREATE INDEX txn_by_child ON txn (child_id, created_at, stored_at);
                    """)
        }
        m.registerMigration("v6: desktop popups by child") { db in
            // The popup a child's balance (or low-balance) alert last showed, so the next one replaces it in place
            // and a recovered balance closes it, also after a restart of the relay.
            try db.execute(
                sql: """
                    CREATE TABLE popup (
                        sink TEXT NOT NULL,
                        child_id TEXT NOT NULL,
                        role TEXT NOT NULL CHECK (role IN ('balance', 'low')),
                        notification_id INTEGER NOT NULL,
                        PRIMARY KEY (sink, child_id, role)
                    );
                    """)
        }
        m.registerMigration("v7: rows from the server set aside") { db in
            // A transaction the relay cannot keep (unreadable, an amount of 0, three decimals, a date in the
            // future): kept here with the reason instead of stopping every sync. Shown by `status`.
            try db.execute(
                sql: """
                    CREATE TABLE rejected (
                        id TEXT PRIMARY KEY,
                        child_id TEXT,
                        reason TEXT NOT NULL,
                        payload TEXT NOT NULL,
                        first_seen_at TEXT NOT NULL
                    );
                    """)
        }
        m.registerMigration("v8: local writes by child") { db in
            // Each hub event asks what the child's writes still waiting here add to the balance: with this partial
            // index (empty when nothing waits) that costs a look-up, not a scan of the child's transactions.
            try db.execute(sql: "CREATE INDEX txn_local_pending ON txn (child_id) WHERE origin = 'local-pending'")
        }
        m.registerMigration("v9: muted alerts") { db in
            // "Mute today" on a popup: the rules send that sink nothing about the child until `until` (the next
            // midnight in the family's time zone). Kept here so a restart does not lift it.
            try db.execute(
                sql: """
                    CREATE TABLE mute (
                        sink TEXT NOT NULL,
                        child_id TEXT NOT NULL,
                        until TEXT NOT NULL,
                        PRIMARY KEY (sink, child_id)
                    );
                    """)
        }
        m.registerMigration("v10: scheduled summaries") { db in
            // The last period each summary rule was sent for: a summary is planned (its deliveries written) in the
            // same transaction that moves this on, so it is sent once, also when it fell due while the relay was down.
            try db.execute(sql: "CREATE TABLE summary_due (rule TEXT PRIMARY KEY, last_due TEXT NOT NULL)")
        }
        m.registerMigration("v11: dedup index only for rows with a key") { db in
            // Only rules with a dedup window give a delivery a key; every other row wrote an index page to each
            // event's commit for nothing. The dedup look-up (`dedup_key = ?`) still uses this index.
            try db.execute(
                sql: """
                    DROP INDEX delivery_dedup;
                    CREATE INDEX delivery_dedup ON delivery (sink, dedup_key, created_at) WHERE dedup_key IS NOT NULL;
                    """)
        }
        m.registerMigration("v12: children removed on the server") { db in
            // A child deleted on the server (the API's only delete) is marked, not erased: its history stays
            // readable, and it is no longer listed, published to Home Assistant or counted.
            try db.execute(sql: "ALTER TABLE child ADD COLUMN removed_at TEXT")
        }
        m.registerMigration("v13: chat messages edited in place") { db in
            // The message a chat sink posted for a child's balance, edited by the next change instead of a new post
            // (Telegram, Slack, Matrix, Discord), also after a restart.
            try db.execute(
                sql: """
                    CREATE TABLE sent_message (
                        sink TEXT NOT NULL,
                        subject TEXT NOT NULL,
                        ref TEXT NOT NULL,
                        posted_at TEXT NOT NULL,
                        PRIMARY KEY (sink, subject)
                    );
                    """)
        }
        m.registerMigration("v14: muted deliveries") { db in
            // An alert to a sink muted for its child is recorded as `muted` (so `deliveries list` shows it) instead of
            // leaving no trace. SQLite cannot change a CHECK constraint: the table is rebuilt with the new state.
            try db.execute(
                sql: """
                    CREATE TABLE delivery_new (
                        id TEXT PRIMARY KEY,
                        sink TEXT NOT NULL,
                        rule TEXT NOT NULL,
                        kind TEXT NOT NULL,
                        child_id TEXT,
                        urgency TEXT NOT NULL CHECK (urgency IN ('low', 'normal', 'critical')),
                        alert TEXT NOT NULL,
                        digest INTEGER NOT NULL DEFAULT 0,
                        dedup_key TEXT,
                        state TEXT NOT NULL CHECK (state IN ('pending', 'in_flight', 'delivered', 'dead', 'merged', 'muted')),
                        attempts INTEGER NOT NULL DEFAULT 0,
                        next_attempt_at TEXT NOT NULL,
                        last_error TEXT,
                        merged_into TEXT,
                        created_at TEXT NOT NULL,
                        delivered_at TEXT
                    );
                    INSERT INTO delivery_new (id, sink, rule, kind, child_id, urgency, alert, digest, dedup_key, state, attempts,
                                              next_attempt_at, last_error, merged_into, created_at, delivered_at)
                        SELECT id, sink, rule, kind, child_id, urgency, alert, digest, dedup_key, state, attempts,
                               next_attempt_at, last_error, merged_into, created_at, delivered_at FROM delivery;
                    DROP TABLE delivery;
                    ALTER TABLE delivery_new RENAME TO delivery;
                    CREATE INDEX delivery_due ON delivery (sink, state, next_attempt_at);
                    CREATE INDEX delivery_dedup ON delivery (sink, dedup_key, created_at) WHERE dedup_key IS NOT NULL;
                    """)
        }
        m.registerMigration("v15: when the database was made") { db in
            // "Start from now": the first catch-up's transactions made before this moment are the family's history;
            // the ones made after it (a relay killed before its first catch-up completed) are alerted as missed.
            try db.execute(
                sql: "INSERT OR IGNORE INTO sync_state (key, value) VALUES ('born_at', ?)",
                arguments: [ISODate.string(Date())])
        }
        m.registerMigration("v16: the trace each delivery continues") { db in
            // The W3C traceparent of the event that planned the delivery (tracing on): each send is a span of it.
            try db.execute(sql: "ALTER TABLE delivery ADD COLUMN trace_parent TEXT")
        }
        m.registerMigration("v17: the newest transactions without a scan") { db in
            // `transactions` lists the newest first and a retention prune deletes by age: without this, each read
            // the whole history (0.7 s at a million transactions). New transactions go in at its right edge.
            try db.execute(sql: "CREATE INDEX txn_recent ON txn (created_at, stored_at)")
        }
        m.registerMigration("v18: what goes first, found without a scan") { db in
            // Summaries and digests go before a backlog of routine alerts: found by their own index, not by reading
            // the whole backlog of a sink.
            try db.execute(
                sql:
                    "CREATE INDEX delivery_first ON delivery (sink, created_at) WHERE \(Delivery.firstSQL) AND state IN \(Delivery.State.waitingSQL)"
            )
        }
        m.registerMigration("v19: a failing sink, for status and /healthz") { db in
            try db.execute(
                sql: """
                    ALTER TABLE sink_state ADD COLUMN failing_since TEXT;
                    ALTER TABLE sink_state ADD COLUMN failing_error TEXT;
                    ALTER TABLE sink_state ADD COLUMN dead_lettering INTEGER NOT NULL DEFAULT 0;
                    """)
        }
        m.registerMigration("v20: wish lists and the goals reached") { db in
            // `reached`: the balance was at or above the price when last compared (goal.reached fires on the flip).
            // `wish_list_at` on the child: when its first list was read (none yet: the first list alerts nothing).
            try db.execute(
                sql: """
                    CREATE TABLE wish_item (
                        id TEXT PRIMARY KEY,
                        child_id TEXT NOT NULL,
                        name TEXT NOT NULL,
                        price_minor INTEGER NOT NULL,
                        url TEXT,
                        notes TEXT,
                        purchased INTEGER NOT NULL DEFAULT 0,
                        purchased_at TEXT,
                        reached INTEGER NOT NULL DEFAULT 0
                    ) WITHOUT ROWID;
                    CREATE INDEX wish_item_child ON wish_item (child_id, price_minor);
                    ALTER TABLE child ADD COLUMN wish_list_at TEXT;
                    """)
        }
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
        deliveriesNumberedByTheirIds(&m)
        indexesOfWhatIsRead(&m)
        balancesThatFollowTheNewestTransaction(&m)
        return m
    }
}
