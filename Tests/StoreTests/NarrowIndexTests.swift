import Alerts
import AllowanceAPI
import Foundation
import GRDB
import StoreContract
import Synchronization
import Testing

@testable import Store

/// Schema v26: `delivery_due` holds only the deliveries still owed (`delivery_dead` only the dead letters), and
/// `txn_by_child` no longer holds `stored_at`.
/// The oracle reads the file through its own connection: the index's entries counted by SQLite's `dbstat`, the
/// query plans by `EXPLAIN QUERY PLAN`, the expected rows written out by hand.
@Suite struct NarrowIndexTests {
    /// Plans nothing, and keeps every event it was asked about.
    final class Watching: AlertPlanner {
        let events = Mutex<[RelayEvent]>([])
        func plan(_ e: RelayEvent) -> [PlannedDelivery] {
            events.withLock { $0.append(e) }
            return []
        }
    }

    /// Entries in one index (its leaf cells), as SQLite's page statistics count them.
    func entries(_ db: DatabaseQueue, _ index: String) throws -> Int {
        try db.read {
            try Int.fetchOne(
                $0, sql: "SELECT coalesce(sum(ncell), 0) FROM dbstat WHERE name = ? AND pagetype = 'leaf'",
                arguments: [index]) ?? -1
        }
    }

    func plan(_ db: DatabaseQueue, _ sql: String) throws -> String {
        try db.read { db in
            try Row.fetchAll(db, sql: "EXPLAIN QUERY PLAN " + sql).map { $0["detail"] as String }
                .joined(separator: "; ")
        }
    }

    /// The previous release's database (v25) with deliveries in every state on two sinks: after the upgrade, the due
    /// index holds the waiting ones only, the claims find exactly those through it, a delivered row leaves it, and
    /// the counts by state still count every row.
    @Test func theDueIndexHoldsOnlyWhatIsStillOwed() throws {
        let past = "2026-01-01T00:00:00.000Z"
        let future = "2999-01-01T00:00:00.000Z"
        // (number, id, sink, kind, state, next attempt)
        let rows: [(Int64, String, String, String, String, String)] = [
            (3, "dlv_a", "family", "transaction.created", "pending", past),
            (4, "dlv_b", "family", "transaction.created", "delivered", past),
            (5, "dlv_c", "family", "transaction.created", "in_flight", past),
            (6, "dlv_d", "family", "transaction.created", "dead", past),
            (7, "dlv_e", "family", "transaction.created", "merged", past),
            (8, "dlv_f", "family", "transaction.created", "pending", future),
            (9, "dlv_g", "phone", "transaction.created", "pending", past),
            (10, "dlv_h", "phone", "transaction.created", "muted", past),
            (11, "dlv_i", "phone", "transaction.created", "delivered", past),
        ]
        let path = try olderDatabase(upTo: "v25: deliveries numbered by their ids") { db in
            for (number, id, sink, kind, state, due) in rows {
                try db.execute(
                    sql: """
                        INSERT INTO delivery (id_number, id, sink, rule, kind, child_id, urgency, alert, state,
                                              next_attempt_at, created_at)
                        VALUES (?, ?, ?, 'r', ?, NULL, 'normal', '{}', ?, ?, ?)
                        """, arguments: [number, id, sink, kind, state, due, past])
            }
        }

        let store = try Store.open(path: path)
        #expect(try store.appliedMigrations() == allMigrations)
        let raw = try DatabaseQueue(path: path)
        #expect(try entries(raw, "delivery_due") == 4, "pending and in flight: a, c, f, g; and nothing else")
        // The claim finds what is due on its sink through the index; an in-flight row is the worker's own.
        #expect(try store.dueDeliveries(sink: "family").map(\.id) == ["dlv_a", "dlv_c"])
        #expect(try store.dueDeliveries(sink: "phone").map(\.id) == ["dlv_g"])
        #expect(try store.dueDeliveriesAndNext(sink: "family").next == ISODate.parse(future))
        let claim = try plan(
            raw,
            "SELECT * FROM delivery WHERE state IN \(Delivery.State.waitingSQL) AND next_attempt_at <= '\(past)' AND (sink = 'family' AND NOT \(Delivery.firstSQL)) ORDER BY created_at, rowid"
        )
        #expect(claim.contains("USING INDEX delivery_due"), "\(claim)")

        // A delivered row leaves the index; a retry stays in it.
        try store.record([("dlv_a", .done(at: Date())), ("dlv_g", .retry(error: "503", at: Date()))])
        #expect(try entries(raw, "delivery_due") == 3)
        #expect(try store.retryDeliveries(id: "dlv_d") == 1, "a dead letter queued again")
        #expect(try entries(raw, "delivery_due") == 4)

        let counts = try store.deliveryCounts()
        #expect(counts["family"] == ["pending": 2, "delivered": 2, "in_flight": 1, "merged": 1])
        #expect(counts["phone"] == ["pending": 1, "muted": 1, "delivered": 1])

        // What `/metrics` reads: the owed and the dead, each through its partial index, no delivered row read.
        try store.record([("dlv_g", .gaveUp(reason: "410"))])
        #expect(try store.owedDeliveryCounts() == ["family": ["pending": 2, "in_flight": 1], "phone": ["dead": 1]])
        // SQLite says SCAN ... USING INDEX for a partial index read whole: only the rows in it.
        let owed = try plan(raw, Store.owedCountsSQL)
        #expect(
            owed.contains("SCAN delivery USING INDEX delivery_due")
                && owed.contains("SCAN delivery USING INDEX delivery_dead")
                && !owed.replacingOccurrences(of: "SCAN delivery USING INDEX", with: "").contains("SCAN delivery"),
            "\(owed)")
    }

    /// The previous release's database (v25) with one child's transactions tied on their dates: after the upgrade,
    /// the newest come first with the later stored first among a tie, read from `txn_by_child` without a sort, and
    /// a balance event finds the later stored one's balance as the one before it.
    @Test func theChildsNewestAreReadInTheOrderTheyWereStored() throws {
        // (description, created_at, balance after), stored in this order: t2 and t3 share a date, as t4 and t5 do.
        let rows = [
            ("t1", "2026-01-01T09:00:00.000Z", 100), ("t2", "2026-01-02T09:00:00.000Z", 200),
            ("t3", "2026-01-02T09:00:00.000Z", 300), ("t4", "2026-01-03T09:00:00.000Z", 450),
            ("t5", "2026-01-03T09:00:00.000Z", 400), ("t0", "2025-12-31T09:00:00.000Z", 50),
        ]
        let path = try olderDatabase(upTo: "v25: deliveries numbered by their ids") { db in
            try db.execute(
                sql:
                    "INSERT INTO child VALUES (?, 'Alice', 'Example', 1000, 400, '2026-01-01T00:00:00.000Z', NULL, NULL)",
                arguments: [alice.lowercased])
            for (n, row) in rows.enumerated() {
                try db.execute(
                    sql: """
                        INSERT INTO txn (id, child_id, amount_minor, type, description, balance_after_minor, created_at,
                                         created_by, origin, received_via, stored_at)
                        VALUES (?, ?, 50, 'Credit', ?, ?, ?, 'Pat', 'server', 'hub', '2026-02-01T00:00:00.000Z')
                        """,
                    arguments: [
                        String(format: "00000000-0000-4000-8000-%012d", n), alice.lowercased, row.0, row.2, row.1,
                    ])
            }
        }

        let store = try Store.open(path: path)
        #expect(try store.appliedMigrations() == allMigrations)
        #expect(try store.transactions(child: alice).map(\.description) == ["t5", "t4", "t3", "t2", "t1", "t0"])
        #expect(try store.transactions(limit: 3).map(\.description) == ["t5", "t4", "t3"])
        let raw = try DatabaseQueue(path: path)
        for sql in [
            Store.newestTransactions(ofOneChild: true, since: false)
                .replacingOccurrences(of: ":child", with: "'\(alice.lowercased)'")
                .replacingOccurrences(of: ":limit", with: "5"),
            "SELECT balance_after_minor FROM txn WHERE child_id = '\(alice.lowercased)' AND origin = 'server' ORDER BY created_at DESC, rowid DESC LIMIT 1",
        ] {
            let steps = try plan(raw, sql)
            #expect(steps.contains("txn_by_child") && !steps.contains("TEMP B-TREE"), "\(steps)")
        }
        let columns = try raw.read {
            try String.fetchAll($0, sql: "SELECT name FROM pragma_index_info('txn_by_child')")
        }
        #expect(columns == ["child_id", "created_at"])

        // A balance event: the balance before it is the newest transaction's, t5's (stored after t4 at the same date).
        let watching = Watching()
        store.setPlanner(watching)
        // 4.50 is not what the transactions say (4.00): a gap to catch up on.
        #expect(
            try store.apply(.balanceUpdated(childId: alice, balance: Decimal(string: "4.50")!)) == .stored(gap: alice))
        let seen = watching.events.withLock { $0 }
        #expect(seen.map(\.previousBalance) == [Decimal(string: "4.00")!])
    }
}
