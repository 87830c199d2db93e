import AllowanceAPI
import Foundation
import GRDB
import StoreContract
import Testing

@testable import Store

/// A database an older release left, opened by this one: each schema change is a migration, and its rows come
/// through it.
@Suite struct SchemaUpgradeTests {
    @Test func aDatabaseFromAnOlderSchemaIsMigratedWithItsData() throws {
        // What version 1 of the relay left behind.
        let path = try olderDatabase(upTo: "v1: children, transactions, inbox, sync state") { db in
            try db.execute(
                sql:
                    "INSERT INTO child VALUES ('11111111-1111-4111-8111-111111111111', 'Alice', 'Example', 1000, 2550, '2026-01-01T00:00:00Z')"
            )
        }
        let store = try Store.open(path: path)
        #expect(try store.appliedMigrations() == allMigrations)
        #expect(try store.children().first?.currentBalance == Decimal(string: "25.50")!)
        _ = try store.enqueueTransaction(child: alice, amount: 1, type: .credit, description: "uses v2")
    }

    /// The previous release's database (v19) with a family in it: opened by this one, its children keep their
    /// balances, and their wish lists are kept from the first read on (the first list alerts nothing).
    @Test func aDatabaseOfThePreviousReleaseTakesWishLists() throws {
        let path = try olderDatabase(upTo: "v19: a failing sink, for status and /healthz") { db in
            try db.execute(
                sql:
                    "INSERT INTO child VALUES ('11111111-1111-4111-8111-111111111111', 'Alice', 'Example', 1000, 2550, '2026-01-01T00:00:00Z', NULL)"
            )
        }
        let store = try Store.open(path: path)
        #expect(try store.appliedMigrations() == allMigrations)
        #expect(try store.children().first?.currentBalance == Decimal(string: "25.50")!)
        let helmet = WishListItem(id: UUID(), childId: alice, name: "helmet", price: 30)
        #expect(try store.storeWishList(child: alice, items: [helmet]) == 0)
        #expect(try store.goals(child: alice).map(\.item) == [helmet])
    }

    /// The inbox of two releases back (v20) rebuilt without AUTOINCREMENT: every row kept in its order, a new one
    /// after them; and an event stored no longer writes sqlite_sequence.
    @Test func theInboxRebuiltWithoutAutoincrementKeepsItsRowsAndOrder() throws {
        let path = try olderDatabase(upTo: "v20: wish lists and the goals reached") { db in
            try db.execute(
                sql:
                    "INSERT INTO child VALUES ('11111111-1111-4111-8111-111111111111', 'Alice', 'Example', 1000, 2550, '2026-01-01T00:00:00Z', NULL, NULL)"
            )
            for (seq, key) in [(3, "c"), (7, "a"), (9, "b")] {
                try db.execute(
                    sql:
                        "INSERT INTO inbox (seq, dedup_key, kind, payload, caught_up, received_at) VALUES (?, ?, 'BalanceUpdated', ?, 0, '2026-01-01T00:00:00Z')",
                    arguments: [seq, key, "{\"balance\":\"\(key)\"}"])
            }
        }
        let store = try Store.open(path: path)
        #expect(try store.appliedMigrations() == allMigrations)
        let raw = try DatabaseQueue(path: path)
        let rows = { try raw.read { try Row.fetchAll($0, sql: "SELECT seq, payload FROM inbox ORDER BY seq") } }
        #expect(
            try rows().map { "\($0["seq"] as Int64):\($0["payload"] as String)" } == [
                #"3:{"balance":"c"}"#, #"7:{"balance":"a"}"#, #"9:{"balance":"b"}"#,
            ])
        let sql = try raw.read { try String.fetchOne($0, sql: "SELECT sql FROM sqlite_master WHERE name = 'inbox'") }
        #expect(sql?.uppercased().contains("AUTOINCREMENT") == false, "\(sql ?? "no inbox")")
        #expect(try store.apply(.balanceUpdated(childId: alice, balance: 26)) == .stored(gap: nil))
        #expect(try rows().map { $0["seq"] as Int64 } == [3, 7, 9, 10], "a new event after the kept ones")
        let sequences = try raw.read { try String.fetchAll($0, sql: "SELECT name FROM sqlite_sequence") }
        #expect(!sequences.contains("inbox"), "\(sequences)")
    }

    /// The previous release's inbox (v21): a transaction's row there repeated its row in `txn` and is dropped; the
    /// balances stay, in order, with what they said; a repeat of a transaction stored before the upgrade is still
    /// one (found by its row), and no unique index is left to write with each event.
    @Test func theInboxKeepsTheBalancesAndTheTransactionsRowsFindRepeats() throws {
        let stored = transaction(1, amount: "1.00", after: "25.50")
        let path = try olderDatabase(upTo: "v21: the inbox without AUTOINCREMENT") { db in
            try db.execute(
                sql:
                    "INSERT INTO child VALUES ('11111111-1111-4111-8111-111111111111', 'Alice', 'Example', 1000, 2550, '2026-01-01T00:00:00Z', NULL, NULL)"
            )
            try db.execute(
                sql: """
                    INSERT INTO txn (id, child_id, amount_minor, type, description, balance_after_minor, created_at, created_by,
                                     origin, received_via, stored_at)
                    VALUES (?, '11111111-1111-4111-8111-111111111111', 100, 'Credit', 't1', 2550, ?, 'Parent', 'server', 'hub',
                            '2026-01-01T00:00:01Z')
                    """, arguments: [stored.id.uuidString.lowercased(), ISO.string(stored.createdAt)])
            let rows: [(Int, String, String, String)] = [
                (2, "TransactionCreated:\(stored.id.uuidString.lowercased())", "TransactionCreated", ""),
                (3, "BalanceUpdated:s-1", "BalanceUpdated", #"{"balance":"25.50"}"#),
                (5, "TransactionCreated:00000000-0000-4000-8000-0000000000ff", "TransactionCreated", ""),
                (8, "BalanceUpdated:s-2", "BalanceUpdated", #"{"balance":"25.50"}"#),
            ]
            for (seq, key, kind, payload) in rows {
                try db.execute(
                    sql:
                        "INSERT INTO inbox (seq, dedup_key, kind, payload, caught_up, received_at) VALUES (?, ?, ?, ?, 0, '2026-01-01T00:00:01Z')",
                    arguments: [seq, key, kind, payload])
            }
        }
        let store = try Store.open(path: path)
        #expect(try store.appliedMigrations() == allMigrations)
        let raw = try DatabaseQueue(path: path)
        let inbox = try raw.read { try Row.fetchAll($0, sql: "SELECT seq, kind, payload FROM inbox ORDER BY seq") }
        #expect(
            inbox.map { "\($0["seq"] as Int64) \($0["kind"] as String) \($0["payload"] as String)" } == [
                #"3 BalanceUpdated {"balance":"25.50"}"#, #"8 BalanceUpdated {"balance":"25.50"}"#,
            ])
        let indexes = try raw.read {
            try String.fetchAll($0, sql: "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'inbox'")
        }
        #expect(indexes.isEmpty, "\(indexes)")
        #expect(try store.apply(.transactionCreated(stored)) == .duplicate)
        #expect(try store.children().first?.currentBalance == Decimal(string: "25.50")!, "the repeat changed nothing")
        #expect(
            try store.apply(.transactionCreated(transaction(2, amount: "1.00", after: "26.50"))) == .stored(gap: nil))
        #expect(try store.transactions().count == 2)
    }

    /// The previous release's transactions and deliveries (v22), rebuilt with checks that compare in place: every
    /// row kept under its rowid (the order it was stored in), each index back, the checks still refusing what they
    /// refused, and no row written with an event makes SQLite build a temporary index (`OpenEphemeral`).
    @Test func theRebuiltTransactionsAndDeliveriesKeepTheirRowsAndChecks() throws {
        let path = try olderDatabase(upTo: "v22: the inbox keeps what has no row of its own") { db in
            try db.execute(
                sql:
                    "INSERT INTO child VALUES ('11111111-1111-4111-8111-111111111111', 'Alice', 'Example', 1000, 2550, '2026-01-01T00:00:00Z', NULL, NULL)"
            )
            for (rowid, n, via) in [(4, 2, "catch-up"), (9, 1, "hub")] {
                try db.execute(
                    sql: """
                        INSERT INTO txn (rowid, id, child_id, amount_minor, type, description, balance_after_minor, created_at,
                                         created_by, origin, received_via, stored_at)
                        VALUES (?, ?, '11111111-1111-4111-8111-111111111111', 100, 'Credit', ?, 2550, '2026-01-01T00:00:00Z',
                                'Parent', 'server', ?, '2026-01-01T00:00:01Z')
                        """, arguments: [rowid, String(format: "00000000-0000-4000-8000-%012d", n), "t\(n)", via])
            }
            for (rowid, id, kind, state) in [
                (3, "dlv_b", "summary", "pending"), (7, "dlv_a", "transaction.created", "delivered"),
            ] {
                try db.execute(
                    sql: """
                        INSERT INTO delivery (rowid, id, sink, rule, kind, child_id, urgency, alert, state, next_attempt_at,
                                              created_at, trace_parent)
                        VALUES (?, ?, 'family', 'all', ?, NULL, 'normal', '{}', ?, '2026-01-01T00:00:00Z',
                                '2026-01-01T00:00:00Z', '00-trace')
                        """, arguments: [rowid, id, kind, state])
            }
        }
        let store = try Store.open(path: path)
        #expect(try store.appliedMigrations() == allMigrations)
        let raw = try DatabaseQueue(path: path)
        try raw.read { db in
            let txns = try Row.fetchAll(db, sql: "SELECT rowid, description, received_via FROM txn ORDER BY rowid")
            #expect(
                txns.map { "\($0[0] as Int64) \($0[1] as String) \($0[2] as String)" } == ["4 t2 catch-up", "9 t1 hub"])
            let deliveries = try Row.fetchAll(
                db, sql: "SELECT rowid, id, state, trace_parent FROM delivery ORDER BY rowid")
            #expect(
                deliveries.map { "\($0[0] as Int64) \($0[1] as String) \($0[2] as String) \($0[3] as String)" } == [
                    "3 dlv_b pending 00-trace", "7 dlv_a delivered 00-trace",
                ])
            let indexes = try String.fetchAll(
                db,
                sql:
                    "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name IN ('txn', 'delivery') AND sql IS NOT NULL ORDER BY name"
            )
            #expect(
                indexes == [
                    "delivery_dead", "delivery_dedup", "delivery_due", "delivery_first", "delivery_set_aside",
                    "txn_by_child",
                    "txn_local_pending",
                ])
            // The summary waiting is found through the partial index it is in.
            let plan = try Row.fetchAll(
                db,
                sql:
                    "EXPLAIN QUERY PLAN SELECT id FROM delivery WHERE sink = 'family' AND \(Delivery.firstSQL) AND state IN \(Delivery.State.waitingSQL) ORDER BY created_at"
            ).map { $0["detail"] as String }.joined(separator: "; ")
            #expect(plan.contains("delivery_first"), "\(plan)")
        }
        let writes = [
            """
            INSERT INTO txn (id, child_id, amount_minor, type, description, balance_after_minor, created_at, created_by, origin,
                             received_via, stored_at)
            VALUES ('00000000-0000-4000-8000-000000000003', '11111111-1111-4111-8111-111111111111', 100, 'Debit', 't3', 2450,
                    '2026-01-02T00:00:00Z', 'Parent', 'server', 'hub', '2026-01-02T00:00:01Z')
            """,
            """
            INSERT INTO delivery (id, sink, rule, kind, urgency, alert, state, next_attempt_at, created_at)
            VALUES ('dlv_c', 'family', 'all', 'transaction.created', 'critical', '{}', 'pending', '2026-01-02T00:00:00Z',
                    '2026-01-02T00:00:00Z')
            """,
            "UPDATE delivery SET state = 'delivered', attempts = attempts + 1, delivered_at = '2026-01-02T00:00:01Z' WHERE id = 'dlv_c'",
        ]
        try raw.write { db in
            for sql in writes {
                let opcodes = try Row.fetchAll(db, sql: "EXPLAIN " + sql).map { $0["opcode"] as String }
                #expect(!opcodes.contains("OpenEphemeral"), "\(sql)\n\(opcodes)")
                try db.execute(sql: sql)
            }
        }
        let refused = [
            "UPDATE txn SET received_via = 'mail' WHERE description = 't1'",
            "UPDATE txn SET type = 'Refund' WHERE description = 't1'",
            "UPDATE txn SET origin = 'elsewhere' WHERE description = 't1'",
            "UPDATE delivery SET state = 'lost' WHERE id = 'dlv_a'",
            "UPDATE delivery SET urgency = 'urgent' WHERE id = 'dlv_a'",
        ]
        for sql in refused {
            #expect(throws: DatabaseError.self, "\(sql)") { try raw.write { try $0.execute(sql: sql) } }
        }
    }

    /// The previous release's database (v23) loses txn_recent: the family's newest transactions, a child's, those
    /// since a date and the age prune come out as they did, each child's range read in txn_by_child, no whole scan.
    @Test func theNewestTransactionsAreReadChildByChild() throws {
        let kids = [
            "11111111-1111-4111-8111-111111111111", "22222222-2222-4222-8222-222222222222",
            "33333333-3333-4333-8333-333333333333",
        ]
        // (description, child, created_at, origin): dates interleave across the children, two share a time.
        var rows: [(String, String, String, String)] = []
        for n in 0..<30 {
            let at = String(format: "2026-01-%02dT%02d:00:00Z", 1 + n % 9, n % 24)
            rows.append(("t\(n)", kids[(n * 7) % 3], n == 29 ? "2026-01-01T00:00:00Z" : at, "server"))
        }
        rows.append(("waiting", kids[1], "2026-01-01T00:30:00Z", "local-pending"))
        let path = try olderDatabase(upTo: "v23: the checks on each event's rows compare without a temporary index") {
            db in
            for (n, row) in rows.enumerated() {
                try db.execute(
                    sql: """
                        INSERT INTO txn (id, child_id, amount_minor, type, description, balance_after_minor, created_at,
                                         created_by, origin, received_via, stored_at)
                        VALUES (?, ?, 100, 'Credit', ?, 100, ?, 'Pat', ?, 'hub', ?)
                        """,
                    arguments: [
                        String(format: "00000000-0000-4000-8000-%012d", n), row.1, row.0, row.2, row.3,
                        String(format: "2026-02-01T00:00:%02dZ", n),
                    ])
            }
        }
        let store = try Store.open(path: path)
        #expect(try store.appliedMigrations() == allMigrations)
        // The oracle: the rows above in date order, newest first (the stored time, later for a later row, breaks ties).
        let newestFirst = rows.enumerated().sorted { ($0.element.2, $0.offset) > ($1.element.2, $1.offset) }
            .map(\.element)
        #expect(try store.transactions(limit: 7).map(\.description) == newestFirst.prefix(7).map(\.0))
        #expect(try store.transactions(limit: 100).map(\.description) == newestFirst.map(\.0))
        let bob = UUID(uuidString: kids[1])!
        #expect(
            try store.transactions(child: bob, limit: 5).map(\.description)
                == newestFirst.filter { $0.1 == kids[1] }.prefix(5).map(\.0))
        let since = try #require(ISODate.parse("2026-01-08T00:00:00Z"))
        #expect(
            try store.transactions(since: since).map(\.description)
                == newestFirst.filter { $0.2 >= "2026-01-08T00:00:00Z" }.map(\.0))

        let raw = try DatabaseQueue(path: path)
        try raw.read { db in
            #expect(try String.fetchOne(db, sql: "SELECT name FROM sqlite_master WHERE name = 'txn_recent'") == nil)
            let queries: [(String, StatementArguments)] = [
                (Store.newestTransactions(ofOneChild: false, since: true), ["limit": 5, "since": "2026-01-08"]),
                (Store.newestTransactions(ofOneChild: true, since: false), ["limit": 5, "child": kids[0]]),
                (Store.pruneTransactions, ["2026-01-05"]),
            ]
            for (sql, arguments) in queries {
                let steps = try Row.fetchAll(db, sql: "EXPLAIN QUERY PLAN " + sql, arguments: arguments)
                    .map { $0["detail"] as String }
                // SQLite says SCAN for a table read whole, SEARCH for a range found in an index.
                #expect(!steps.contains { $0.hasPrefix("SCAN txn") || $0.hasPrefix("SCAN mine") }, "\(steps)")
                #expect(steps.contains { $0.contains("txn_by_child") }, "\(steps)")
            }
        }
        // Synced transactions older than the cutoff go, every child's; the local write waiting stays.
        let cutoff = "2026-01-05T00:00:00Z"
        let now = try #require(ISODate.parse(cutoff)).addingTimeInterval(86400)
        let pruned = try store.prune(transactionDays: 1, now: now)
        let kept = rows.filter { $0.2 >= cutoff || $0.3 != "server" }
        #expect(pruned.transactions == rows.count - kept.count)
        #expect(Set(try store.transactions(limit: 100).map(\.description)) == Set(kept.map(\.0)))
    }

    @Test func outboxRowsSurviveTheV3TableRebuild() throws {
        let path = try olderDatabase(upTo: "v2: outbox") { db in
            try db.execute(
                sql:
                    "INSERT INTO child VALUES ('11111111-1111-4111-8111-111111111111', 'Alice', 'Example', 1000, 2550, '2026-01-01T00:00:00Z')"
            )
            try db.execute(
                sql: """
                    INSERT INTO outbox (idempotency_key, local_txn_id, child_id, amount_minor, type, description, state, attempts,
                                        next_attempt_at, created_at)
                    VALUES ('k1', '00000000-0000-4000-8000-00000000000a', '11111111-1111-4111-8111-111111111111', 500, 'Credit',
                            'queued by v2', 'pending', 3, '2026-01-01T00:00:00Z', '2026-01-01T00:00:00Z')
                    """)
        }
        let store = try Store.open(path: path)
        #expect(try store.appliedMigrations() == allMigrations)
        let row = try #require(try store.outbox().first)
        #expect(row.description == "queued by v2" && row.attempts == 3 && row.state == .pending)
        try store.outboxDead(row.seq, reason: "v3 allows dead letters")
        #expect(try store.outbox().first?.state == .dead)
    }

    /// The previous release's database (v26): its children keep their balances and times, held in their rows; the
    /// first hub transaction after the upgrade is where each balance follows from.
    @Test func theBalancesOfThePreviousReleaseStayTheirRowsUntilATransactionComes() throws {
        let path = try olderDatabase(upTo: "v26: the indexes each event writes hold only what is read") { db in
            try db.execute(
                sql:
                    "INSERT INTO child VALUES ('11111111-1111-4111-8111-111111111111', 'Alice', 'Example', 1000, 2550, '2026-01-01T00:00:00.000Z', NULL, NULL)"
            )
            try db.execute(
                sql: """
                    INSERT INTO txn (id, child_id, amount_minor, type, description, balance_after_minor, created_at, created_by,
                                     origin, received_via, stored_at)
                    VALUES ('00000000-0000-4000-8000-000000000001', '11111111-1111-4111-8111-111111111111', 100, 'Credit',
                            'before', 9999, '2025-12-31T00:00:00.000Z', 'Pat', 'server', 'hub', '2025-12-31T00:00:00.000Z')
                    """)
        }
        let store = try Store.open(path: path)
        #expect(try store.appliedMigrations() == allMigrations)
        #expect(try store.currentBalance(child: alice) == Decimal(string: "25.50")!, "the row's, not the transaction's")
        #expect(try store.balanceTimes()[alice] == ISODate.parse("2026-01-01T00:00:00.000Z"))
        let next = transaction(2, amount: "1.00", after: "26.50")
        _ = try store.apply([.transactionCreated(next), .balanceUpdated(childId: alice, balance: next.balanceAfter)])
        #expect(try store.currentBalance(child: alice) == Decimal(string: "26.50")!)
    }
}
