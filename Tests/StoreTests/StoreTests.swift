import AllowanceAPI
import Foundation
import GRDB
import SignalRProtocol
import StoreContract
import Testing

@testable import Store

func temporaryStorePath() -> String {
    FileManager.default.temporaryDirectory.appending(path: "store-\(UUID())").appending(path: "relay.sqlite").path
}

let allMigrations = [
    "v1: children, transactions, inbox, sync state", "v2: outbox", "v3: outbox dead letters", "v4: delivery ledger",
    "v5: latest transaction per child by index", "v6: desktop popups by child", "v7: rows from the server set aside",
    "v8: local writes by child", "v9: muted alerts", "v10: scheduled summaries",
    "v11: dedup index only for rows with a key",
    "v12: children removed on the server", "v13: chat messages edited in place", "v14: muted deliveries",
    "v15: when the database was made",
    "v16: the trace each delivery continues",
    "v17: the newest transactions without a scan",
    "v18: what goes first, found without a scan",
    "v19: a failing sink, for status and /healthz",
    "v20: wish lists and the goals reached",
    "v21: the inbox without AUTOINCREMENT",
    "v22: the inbox keeps what has no row of its own",
    "v23: the checks on each event's rows compare without a temporary index",
]

let alice = UUID(uuidString: "11111111-1111-4111-8111-111111111111")!

func child(_ balance: String) -> Child {
    Child(
        id: alice, firstName: "Alice", lastName: "Example", weeklyAllowance: 10,
        currentBalance: Decimal(string: balance)!)
}

func transaction(_ n: Int, amount: String, type: TransactionType = .credit, after: String) -> Transaction {
    Transaction(
        id: UUID(uuidString: String(format: "00000000-0000-4000-8000-%012d", n))!, childId: alice,
        amount: Decimal(string: amount)!, type: type, description: "t\(n)", balanceAfter: Decimal(string: after)!,
        createdAt: Date(timeIntervalSince1970: 1_795_341_600 + Double(n)), createdByName: "Pat")
}

@Suite struct StoreTests {
    @Test func opensMigratesAndReopensWithTheData() throws {
        let path = temporaryStorePath()
        do {
            let store = try Store.open(path: path)
            #expect(try store.appliedMigrations() == allMigrations)
            try store.storeCaughtUp(children: [child("25.50")], transactions: [])
        }
        let again = try Store.open(path: path)
        #expect(try again.children().map(\.currentBalance) == [Decimal(string: "25.50")!])
    }

    @Test func theCountsStatusShowsFollowInsertsRepeatsAndPrunes() throws {
        let store = try Store.open(path: temporaryStorePath())
        let history = (1...10).map { transaction($0, amount: "1.00", after: "\($0).00") }
        try store.storeCaughtUp(children: [child("10.00")], transactions: history)
        #expect(try store.summary().transactions == 10)
        try store.storeCaughtUp(children: [child("10.00")], transactions: Array(history.suffix(4)))
        #expect(try store.summary().transactions == 10, "a transaction stored again is not counted again")
        _ = try store.apply([
            .transactionCreated(transaction(11, amount: "1.00", after: "11.00")),
            .balanceUpdated(childId: alice, balance: 11),
        ])
        let before = try store.summary()
        #expect(before.transactions == 11)
        #expect(before.inboxRows == 1, "the balance; a transaction's record is its row")
        let pruned = try store.prune(inboxDays: 1, transactionDays: 1, now: Date().addingTimeInterval(3 * 86400))
        #expect(pruned.transactions == 11)
        #expect(pruned.inbox == before.inboxRows)
        let after = try store.summary()
        #expect(after.transactions == 0 && after.inboxRows == 0)
    }

    /// A transaction's record is its row in `txn` (how and when it came included); a balance, which has no row of
    /// its own, is kept in the inbox as it came, each arrival once.
    @Test func aTransactionIsKeptAsItsRowAndABalanceAsItCameInTheInbox() throws {
        let store = try Store.open(path: temporaryStorePath())
        try store.storeCaughtUp(children: [child("10.00")], transactions: [])
        let t = transaction(1, amount: "2.50", after: "12.50")
        _ = try store.apply([
            .transactionCreated(t), .balanceUpdated(childId: alice, balance: Decimal(string: "12.50")!),
        ])
        _ = try store.apply(.balanceUpdated(childId: alice, balance: Decimal(string: "12.50")!))
        let rows = try DatabaseQueue(path: store.path).read { db in
            try Row.fetchAll(db, sql: "SELECT kind, payload, received_at FROM inbox ORDER BY seq")
        }
        #expect(rows.allSatisfy { !($0["received_at"] as String).isEmpty }, "each arrival's time is kept")
        #expect(rows.map { $0["kind"] as String } == ["BalanceUpdated", "BalanceUpdated"], "the same balance twice")
        let balance =
            try JSONSerialization.jsonObject(with: Data((rows[0]["payload"] as String).utf8)) as? [String: String]
        #expect(balance == ["event": "BalanceUpdated", "childId": alice.uuidString.lowercased(), "balance": "12.50"])
        let stored = try DatabaseQueue(path: store.path).read { db in
            try Row.fetchOne(
                db,
                sql:
                    "SELECT amount_minor, balance_after_minor, description, received_via, stored_at FROM txn WHERE id = ?",
                arguments: [t.id.uuidString.lowercased()])
        }
        #expect(stored?["amount_minor"] as Int64? == 250 && stored?["balance_after_minor"] as Int64? == 1250)
        #expect(stored?["description"] as String? == "t1")
        #expect(stored?["received_via"] as String? == "hub" && stored?["stored_at"] as String? != nil)
    }

    @Test func aDamagedPageIsFoundByTheIntegrityCheckNotAtOpen() throws {
        let path = temporaryStorePath()
        do {
            let store = try Store.open(path: path)
            let history = (1...3000).map { transaction($0, amount: "1.00", after: "\($0).00") }
            try store.storeCaughtUp(children: [child("3000.00")], transactions: history)
            #expect(try store.integrityProblem() == nil, "a sound file")
            try store.checkpoint()
        }
        // Garbage over a page in the middle of the file (the transactions' pages), the schema's first page intact:
        // bit rot, a bad sector.
        let file = try #require(FileHandle(forUpdatingAtPath: path))
        let size = try file.seekToEnd()
        try file.seek(toOffset: size / 2 / 4096 * 4096 + 8)
        try file.write(contentsOf: Data(repeating: 0x42, count: 4000))
        try file.close()
        // Opening reads no more than the schema: it works, and so would `status` (0.3 s a million transactions faster).
        let damaged = try Store.open(path: path)
        let problem = try #require(try damaged.integrityProblem())
        #expect(
            problem.contains("failed its integrity check") && problem.contains("allowance-relay run --rebuild")
                && problem.contains(path))
    }

    @Test func theWriterTakesTheLargeCacheForABurstAndGivesItBackAfter() throws {
        let store = try Store.open(path: temporaryStorePath())
        let writerCache = { try store.pool.write { db in try Int.fetchOne(db, sql: "PRAGMA cache_size") } }
        #expect(try writerCache() == -Store.Tuning.defaultCacheKiB)
        // SQLite's own checkpoint in the commit is replaced by the checkpointer's hook (SQLite reads 0 then).
        #expect(try store.pool.write { db in try Int.fetchOne(db, sql: "PRAGMA wal_autocheckpoint") } == 0)
        #expect(
            try store.pool.read { db in try Int.fetchOne(db, sql: "PRAGMA cache_size") } == -Store.Tuning.readerCacheKiB
        )

        try store.storeCaughtUp(children: [child("25.50")], transactions: [])
        let burst = (0..<Store.Tuning.burstEvents).map { HubEvent.balanceUpdated(childId: alice, balance: Decimal($0)) }
        #expect(try store.apply(burst).allSatisfy { if case .stored = $0 { true } else { false } })
        #expect(try writerCache() == -Store.Tuning.writerCacheKiB)
        _ = try store.apply([.balanceUpdated(childId: alice, balance: 7)])
        #expect(try writerCache() == -Store.Tuning.defaultCacheKiB)
        #expect(try store.children().first?.currentBalance == 7)
    }

    /// A database file as an older relay left it: migrated up to `migration`, then `fill` writes its rows.
    func olderDatabase(upTo migration: String, _ fill: (Database) throws -> Void) throws -> String {
        let path = temporaryStorePath()
        try FileManager.default.createDirectory(
            atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        let old = try DatabaseQueue(path: path)
        try Schema.migrator.migrate(old, upTo: migration)
        try old.write(fill)
        return path
    }

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
                    "delivery_dedup", "delivery_due", "delivery_first", "txn_by_child", "txn_local_pending",
                    "txn_recent",
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

    /// When the hub last sent something (`status`, the metrics): a transaction alone counts, as a balance does; one
    /// fetched by a catch-up does not (the catch-up is its own contact).
    @Test func theLastEventIsTheNewestTransactionOrBalanceThatCameOverTheHub() throws {
        let store = try Store.open(path: temporaryStorePath())
        let day = Date(timeIntervalSince1970: 1_795_341_600 + 86400)
        try store.storeCaughtUp(
            children: [child("10.00")], transactions: [transaction(1, amount: "1.00", after: "10.00")], at: day)
        #expect(try store.contact().lastEvent == nil)
        #expect(try store.contact().lastContact == day)
        _ = try store.apply(.transactionCreated(transaction(2, amount: "1.00", after: "11.00")), at: day + 60)
        #expect(try store.contact().lastEvent == day + 60)
        _ = try store.apply(.balanceUpdated(childId: alice, balance: 11), at: day + 120)
        #expect(try store.contact().lastEvent == day + 120)
        #expect(try store.contact().lastContact == day + 120)
        // A catch-up's page stored, the catch-up not complete: contact with the server, not a hub event.
        try store.storeCaughtUp(
            children: [child("12.00")], transactions: [transaction(3, amount: "1.00", after: "12.00")],
            complete: false, at: day + 180)
        #expect(try store.contact().lastEvent == day + 120)
        #expect(try store.contact().lastContact == day + 180)
    }

    @Test func theSameTransactionTwiceIsOneRow() throws {
        let store = try Store.open(path: temporaryStorePath())
        try store.storeCaughtUp(children: [child("25.50")], transactions: [])
        let t = transaction(1, amount: "19.99", after: "45.49")
        #expect(try store.apply(.transactionCreated(t)) == .stored(gap: nil))
        #expect(try store.apply(.transactionCreated(t)) == .duplicate)
        #expect(try store.transactions().count == 1)
        #expect(try store.inbox().isEmpty, "a transaction's record is its row")
        #expect(try store.children().first?.currentBalance == Decimal(string: "45.49")!)
    }

    @Test(arguments: ["0.1", "19.99", "0.01", "12345678.91"])
    func moneyIsExact(_ amount: String) throws {
        let store = try Store.open(path: temporaryStorePath())
        try store.storeCaughtUp(children: [child("0")], transactions: [])
        let t = transaction(7, amount: amount, after: amount)
        _ = try store.apply(.transactionCreated(t))
        let stored = try #require(try store.transactions().first)
        #expect(stored.amount == Decimal(string: amount)!)
        #expect(stored.balanceAfter == Decimal(string: amount)!)
    }

    /// Never rounded: set aside with the reason (one such row must not stop the others).
    @Test func moreThanTwoDecimalsIsRefusedNotRounded() throws {
        let store = try Store.open(path: temporaryStorePath())
        try store.storeCaughtUp(children: [child("0")], transactions: [])
        #expect(
            try store.apply(.transactionCreated(transaction(1, amount: "1.005", after: "1.005")))
                == .rejected(
                    reason:
                        "transaction 00000000-0000-4000-8000-000000000001: its amount 1.005 has more than two decimals",
                    first: true))
        #expect(try store.transactions().isEmpty, "nothing half-written")
        #expect(try store.inbox().isEmpty)
        #expect(try store.rejectedRows().map(\.id) == ["00000000-0000-4000-8000-000000000001"])
    }

    @Test func aTransactionThatDoesNotFollowTheCachedBalanceIsAGap() throws {
        let store = try Store.open(path: temporaryStorePath())
        try store.storeCaughtUp(children: [child("25.50")], transactions: [])
        // 25.50 + 5.00 should give 30.50; 40.00 means something in between was missed.
        #expect(
            try store.apply(.transactionCreated(transaction(1, amount: "5.00", after: "40.00"))) == .stored(gap: alice))
        #expect(
            try store.apply(.balanceUpdated(childId: alice, balance: Decimal(string: "40.00")!)) == .stored(gap: nil))
        #expect(
            try store.apply(.balanceUpdated(childId: alice, balance: Decimal(string: "41.00")!)) == .stored(gap: alice))
        #expect(try store.children().first?.currentBalance == Decimal(string: "41.00")!, "the server's balance wins")
    }

    /// A catch-up asks for the balances; a live event sets Alice's balance before the answer is stored. The
    /// answer is older than the event: it must not overwrite it (found by the connection-reset scenario).
    @Test func aLiveBalanceNewerThanTheCatchUpsAnswerIsKept() throws {
        let store = try Store.open(path: temporaryStorePath())
        try store.storeCaughtUp(children: [child("25.50")], transactions: [], at: Date(timeIntervalSinceNow: -60))
        let asked = Date()
        Thread.sleep(forTimeInterval: 0.01)
        _ = try store.apply(.balanceUpdated(childId: alice, balance: Decimal(string: "30.50")!))
        try store.storeCaughtUp(children: [child("25.50")], transactions: [], balancesAskedAt: asked)
        #expect(try store.children().first?.currentBalance == Decimal(string: "30.50")!, "the newer live balance stays")
        // With no live event since it was asked for, the server's answer wins.
        try store.storeCaughtUp(children: [child("31.00")], transactions: [], balancesAskedAt: Date())
        #expect(try store.children().first?.currentBalance == Decimal(string: "31.00")!)
    }

    @Test func eventsTheCacheCannotPlaceAskForACatchUp() throws {
        let store = try Store.open(path: temporaryStorePath())
        let idOnly = try store.apply(.transactionCreatedId(UUID()))
        let unknownChild = try store.apply(.transactionCreated(transaction(1, amount: "1", after: "1")))
        for result in [idOnly, unknownChild] {
            guard case .needsCatchUp = result else {
                Issue.record("expected a catch-up request, got \(result)")
                continue
            }
        }
    }

    @Test func aCorruptFileGivesAnErrorNamingItAndTheFix() throws {
        let path = temporaryStorePath()
        try FileManager.default.createDirectory(
            atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        try Data(repeating: 0x42, count: 8192).write(to: URL(fileURLWithPath: path))
        do {
            _ = try Store.open(path: path)
            Issue.record("opened garbage")
        } catch {
            #expect(error.path == path && error.code == .unreadable)
            #expect(error.message.contains("allowance-relay run --rebuild"))
        }
        let aside = try Store.moveAside(path: path)
        #expect(FileManager.default.fileExists(atPath: aside))
        #expect(try Store.open(path: path).children().isEmpty, "a fresh database after moving the broken one aside")
    }
}

/// Family money data is the owner's alone, whatever the umask the relay was started with.
@Suite(.serialized) struct FilePermissionTests {
    private func mode(_ path: String) -> mode_t {
        var info = stat()
        return stat(path, &info) == 0 ? info.st_mode & 0o777 : 0
    }

    @Test func theFolderAndEveryDatabaseFileAreTheOwnersOnlyUnderAnOpenUmask() throws {
        let old = umask(0o022)
        defer { umask(old) }
        let path = temporaryStorePath()
        let store = try Store.open(path: path)
        try store.storeCaughtUp(children: [child("1")], transactions: [])  // a write: the WAL and SHM files exist
        #expect(mode((path as NSString).deletingLastPathComponent) == 0o700)
        for suffix in ["", "-wal", "-shm"] {
            #expect(FileManager.default.fileExists(atPath: path + suffix), "\(suffix)")
            #expect(mode(path + suffix) == 0o600, "relay.sqlite\(suffix) is \(String(mode(path + suffix), radix: 8))")
        }
    }

    @Test func aDatabaseLeftReadableByAnOlderVersionIsMadePrivate() throws {
        let path = temporaryStorePath()
        _ = try Store.open(path: path)
        chmod(path, 0o644)
        _ = try Store.open(path: path)
        #expect(mode(path) == 0o600)
    }
}
