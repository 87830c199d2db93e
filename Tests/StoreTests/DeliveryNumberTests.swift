import Alerts
import Foundation
import GRDB
import StoreContract
import Synchronization
import Testing

@testable import Store

/// Schema v25: a delivery row is stored under its id's first 64 bits, with no index of ids; rows from before, ids of
/// another form and numbers already taken are set aside, and every one is still found by its id. The oracle reads the
/// file through its own connection and works the numbers out from the ids' text itself.
@Suite struct DeliveryNumberTests {
    struct EverythingToOneSink: AlertPlanner {
        func plan(_ e: RelayEvent) -> [PlannedDelivery] {
            [PlannedDelivery(sink: "s", rule: "r", kind: e.kind, urgency: .normal)]
        }
    }

    /// The id's first 16 hexadecimal digits (after `dlv_`, dashes left out) as a number.
    func expectedNumber(_ id: String) -> Int64? {
        Int64(id.dropFirst(4).filter { $0 != "-" }.prefix(16), radix: 16)
    }

    func numbers(_ db: DatabaseQueue) throws -> [String: Int64] {
        try db.read { db in
            Dictionary(
                uniqueKeysWithValues: try Row.fetchAll(db, sql: "SELECT id, id_number FROM delivery").map {
                    ($0["id"] as String, $0["id_number"] as Int64)
                })
        }
    }

    func state(_ db: DatabaseQueue, _ id: String) throws -> String? {
        try db.read { try String.fetchOne($0, sql: "SELECT state FROM delivery WHERE id = ?", arguments: [id]) }
    }

    @Test func plannedDeliveriesAreStoredUnderTheirIdsAndFoundByThem() throws {
        let store = try Store.open(path: temporaryStorePath())
        let handed = Mutex<[String]>([])
        store.setPlanner(EverythingToOneSink()) { rows in handed.withLock { $0 += rows.map(\.id) } }
        for n in 0..<50 { try store.raise(RelayEvent(kind: .connectionLost, at: Date(), detail: "\(n)")) }
        let ids = handed.withLock { $0 }
        let raw = try DatabaseQueue(path: store.path)
        let stored = try numbers(raw)
        #expect(ids.count == 50 && stored.count == 50)
        for id in ids { #expect(stored[id] == expectedNumber(id), "\(id)") }
        #expect(ids.map { stored[$0]! } == ids.map { stored[$0]! }.sorted(), "in the order they were planned")
        #expect(ids.allSatisfy { stored[$0]! >= 1 << 40 })

        // Found by id (the CLI, an outcome) without an index of ids, and without reading the table whole.
        #expect(try store.delivery(id: ids[17])?.id == ids[17])
        try store.record([(ids[17], .done(at: Date()))])
        #expect(try state(raw, ids[17]) == "delivered")
        #expect(try state(raw, ids[18]) == "pending")
        try raw.read { db in
            let indexes = try String.fetchAll(db, sql: "SELECT name FROM pragma_index_list('delivery') ORDER BY name")
            #expect(
                indexes == ["delivery_dead", "delivery_dedup", "delivery_due", "delivery_first", "delivery_set_aside"])
            let update = "UPDATE delivery SET state = 'dead' WHERE \(Delivery.keyCondition)"
            let arguments: StatementArguments = [expectedNumber(ids[3]), ids[3], ids[3]]
            let plan = try Row.fetchAll(db, sql: "EXPLAIN QUERY PLAN " + update, arguments: arguments)
                .map { $0["detail"] as String }
            #expect(!plan.contains { $0.hasPrefix("SCAN") }, "\(plan)")
            // One pass: no temporary table of the rows to change, no set of row ids merged from two paths.
            let opcodes = try Row.fetchAll(db, sql: "EXPLAIN " + update, arguments: arguments)
                .map { $0["opcode"] as String }
            #expect(!opcodes.contains("OpenEphemeral") && !opcodes.contains { $0.hasPrefix("RowSet") }, "\(opcodes)")
        }
    }

    /// Two processes' ids made in the same millisecond with the same count share their first 64 bits; an id of
    /// another form has none. The second and the third are set aside, and each of the three is found and updated by
    /// its own id.
    @Test func anIdWhoseNumberIsTakenIsSetAsideAndStillFound() throws {
        let store = try Store.open(path: temporaryStorePath())
        let raw = try DatabaseQueue(path: store.path)
        let ids = [
            "dlv_019aae9f-b01a-7123-8000-000000000001", "dlv_019aae9f-b01a-7123-9fff-ffffffffffff", "dlv_imported-7",
        ]
        let now = Date()
        try raw.write { db in
            for id in ids {
                let d = Delivery(
                    id: id, sink: "s", rule: "r", kind: .connectionLost, childId: nil, urgency: .normal, alert: "{}",
                    digest: false, state: .pending, attempts: 0, nextAttemptAt: now, createdAt: now)
                try Delivery.insert(db, d, dedupKey: nil, createdAt: now)
            }
        }
        let stored = try numbers(raw)
        #expect(stored[ids[0]] == 0x019a_ae9f_b01a_7123)
        #expect(stored[ids[1]] == 1 && stored[ids[2]] == 2, "set aside: \(stored)")
        for (n, id) in ids.enumerated() {
            #expect(try store.delivery(id: id)?.id == id)
            try store.record([(id, .retry(error: "try \(n)", at: now))])
        }
        let errors = try raw.read { db in
            try Row.fetchAll(db, sql: "SELECT id, last_error FROM delivery").map {
                "\($0["id"] as String) \($0["last_error"] as String)"
            }
        }
        #expect(Set(errors) == Set(ids.enumerated().map { "\($1) try \($0)" }), "each its own outcome")
    }

    /// Which ids have a number: `dlv_`, a version 7 UUID in lower case, its first 64 bits at or above the set-aside
    /// line and below 2^63. The oracle is the text itself, read by the standard library.
    @Test func anIdHasANumberOnlyInItsOneForm() {
        let good = "dlv_019aae9f-b01a-7123-8000-000000000001"
        #expect(Delivery.number(of: good) == expectedNumber(good))
        #expect(Delivery.number(of: good) == 0x019a_ae9f_b01a_7123)
        for other in [
            "dlv_019AAE9F-B01A-7123-8000-000000000001",  // upper case
            "dlv_019aae9f-b01a-4123-8000-000000000001",  // version 4
            "dlv_019aae9fb01a-7123-8000-000000000001",  // a dash missing
            "dlv_019aae9f-b01a-712",  // cut short
            "dlw_019aae9f-b01a-7123-8000-000000000001",  // another prefix
            "019aae9f-b01a-7123-8000-000000000001",  // no prefix
            "dlv_0000000f-b01a-7123-8000-000000000001",  // below the set-aside line
            "dlv_8000000f-b01a-7123-8000-000000000001",  // 2^63 and above
            "dlv_imported-7", "dlv_", "",
        ] {
            #expect(Delivery.number(of: other) == nil, "\(other)")
        }
    }

    /// The previous release's database (v24): its deliveries keep their row ids as numbers (set aside), and each is
    /// found, recorded, retried and merged by its id; a delivery planned after the upgrade is numbered by its id.
    @Test func theDeliveriesOfThePreviousReleaseAreFoundByTheirIds() throws {
        let rows = [
            (3, "dlv_019aae9f-b01a-7123-8000-000000000001", "pending"), (7, "dlv_0b5e1e4e-old-form", "dead"),
            (9, "dlv_019aae9f-b01a-7124-8000-000000000002", "pending"),
            (12, "dlv_019aae9f-b01a-7125-8000-000000000003", "delivered"),
        ]
        let path = try olderDatabase(upTo: "v24: the newest transactions read child by child") { db in
            for (rowid, id, state) in rows {
                try db.execute(
                    sql: """
                        INSERT INTO delivery (rowid, id, sink, rule, kind, child_id, urgency, alert, state, attempts,
                                              next_attempt_at, created_at, trace_parent)
                        VALUES (?, ?, 's', 'r', 'connection.lost', NULL, 'normal', '{"n":1}', ?, 2, '2026-01-01T00:00:00Z',
                                '2026-01-01T00:00:00Z', '00-trace')
                        """, arguments: [rowid, id, state])
            }
        }
        let store = try Store.open(path: path)
        #expect(try store.appliedMigrations() == allMigrations)
        let raw = try DatabaseQueue(path: path)
        try raw.read { db in
            let kept = try Row.fetchAll(
                db, sql: "SELECT id_number, id, state, attempts, alert, trace_parent FROM delivery ORDER BY id_number"
            ).map {
                "\($0[0] as Int64) \($0[1] as String) \($0[2] as String) \($0[3] as Int) \($0[4] as String) \($0[5] as String)"
            }
            #expect(kept == rows.map { "\($0.0) \($0.1) \($0.2) 2 {\"n\":1} 00-trace" })
        }
        for (_, id, state) in rows { #expect(try store.delivery(id: id)?.state.rawValue == state) }
        try store.record([(rows[0].1, .done(at: Date()))])
        #expect(try state(raw, rows[0].1) == "delivered")
        #expect(try store.retryDeliveries(id: rows[1].1) == 1)
        #expect(try state(raw, rows[1].1) == "pending")

        // A new delivery, planned after the upgrade, goes under its id's number, after the old rows.
        let handed = Mutex<[String]>([])
        store.setPlanner(EverythingToOneSink()) { rows in handed.withLock { $0 += rows.map(\.id) } }
        try store.raise(RelayEvent(kind: .connectionLost, at: Date(), detail: "after"))
        let new = try #require(handed.withLock { $0.first })
        #expect(try numbers(raw)[new] == expectedNumber(new))
        let digest = try store.foldIntoDigest(
            [try #require(try store.delivery(id: rows[2].1)), try #require(try store.delivery(id: new))],
            digest: RelayEvent(kind: .digest, at: Date(), detail: "both"), currency: nil)
        #expect(try numbers(raw)[digest.id] == expectedNumber(digest.id))
        #expect(try state(raw, rows[2].1) == "merged" && state(raw, new) == "merged")
    }
}
