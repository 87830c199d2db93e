import Alerts
import AllowanceAPI
import Foundation
import Store
import Sync
import TestSupport
import Testing

/// A backend that pages carelessly or sends rows no real server should: the catch-up loses nothing it can
/// keep, sets aside what it cannot (saying which and why), and never follows a server forever.
@Suite(.serialized, .timeLimit(.minutes(1))) struct HostileBackendTests {
    struct EveryRejection: AlertPlanner {
        func plan(_ e: RelayEvent) -> [PlannedDelivery] {
            e.kind == .syncRejected ? [PlannedDelivery(sink: "parents", rule: "r", kind: e.kind, urgency: .normal)] : []
        }
    }

    /// An empty cache and a client of the simulator at `base`.
    private func fresh(_ base: URL) throws -> (Store, APIClient) {
        (try Store.open(path: temporaryStorePath()), APIClient(baseURL: base, token: "store-token"))
    }

    private let children = [
        "11111111-1111-4111-8111-111111111111", "22222222-2222-4222-8222-222222222222",
        "33333333-3333-4333-8333-333333333333",
    ]

    @Test func pagesShorterThanAskedAreNotTakenForTheEnd() async throws {
        try await withSimulator { base in
            let (store, api) = try fresh(base)
            try await post(base, "/_sim/burst?count=120")
            try await post(base, "/_sim/pages?cap=50")
            let first = try await CatchUp(store: store, api: api, pageSize: 100).run()
            let afterFirst = try store.transactions(limit: 1000).count
            #expect(first.stored == 120 && afterFirst == 120, "\(first)")
            try await post(base, "/_sim/burst?count=80")  // while "disconnected"
            let second = try await CatchUp(store: store, api: api, pageSize: 100).run()
            let afterSecond = try store.transactions(limit: 1000).count
            #expect(second.stored == 80 && afterSecond == 200, "\(second)")
        }
    }

    @Test func aServerThatIgnoresOffsetIsStoppedWithAClearError() async throws {
        try await withSimulator { base in
            let (store, api) = try fresh(base)
            try await post(base, "/_sim/burst?count=60")
            try await post(base, "/_sim/pages?cap=10&mode=ignore-offset")
            await #expect { try await CatchUp(store: store, api: api, pageSize: 10).run() } throws: {
                "\($0)".contains("sent the same transactions again") && "\($0)".contains("seems to ignore offset")
            }
            try await post(base, "/_sim/pages?mode=endless")
            await #expect { try await CatchUp(store: store, api: api, pageSize: 10, maxPages: 25).run() } throws: {
                "\($0)".contains("did not end after 25 pages (250 transactions)")
            }
        }
    }

    @Test func badRowsAreSetAsideWithTheirReasonAndTheRestSyncs() async throws {
        try await withSimulator { base in
            let (store, api) = try fresh(base)
            store.setPlanner(EveryRejection())
            try await post(base, "/_sim/burst?count=30")
            let bad = [
                ("zero", "amount=0"), ("negative", "amount=-2"), ("decimals", "amount=1.255"),
                ("future", "createdAt=9999-01-01T00:00:00Z"), ("feb30", "createdAt=2026-02-30T10:00:00Z"),
                ("year0", "createdAt=0000-01-01T00:00:00Z"),
            ]
            for (n, (_, query)) in bad.enumerated() {
                let id = String(format: "00000000-0000-4000-8000-%012d", n + 1)
                try await post(base, "/_sim/badrow?child=\(children[n % 3])&id=\(id)&\(query)")
            }
            let report = try await CatchUp(store: store, api: api).run()
            #expect(report.stored == 30 && report.rejected == 6, "\(report)")
            let aside = Dictionary(uniqueKeysWithValues: try store.rejectedRows().map { ($0.id, $0.reason) })
            #expect(aside["00000000-0000-4000-8000-000000000001"] == "its amount 0 is not above 0")
            #expect(aside["00000000-0000-4000-8000-000000000002"] == "its amount -2 is not above 0")
            #expect(aside["00000000-0000-4000-8000-000000000003"] == "its amount 1.255 has more than two decimals")
            #expect(aside["00000000-0000-4000-8000-000000000004"]?.hasSuffix("is in the future") == true)
            #expect(
                aside["00000000-0000-4000-8000-000000000005"]
                    == "transaction.createdAt is not an ISO-8601 date: \"2026-02-30T10:00:00Z\".")
            #expect(
                aside["00000000-0000-4000-8000-000000000006"]
                    == "transaction.createdAt is not an ISO-8601 date: \"0000-01-01T00:00:00Z\".")
            // Everything the server holds that is good is here, with the server's balances.
            for c in try await api.children() {
                #expect(try store.children().first { $0.id == c.id }?.currentBalance == c.currentBalance)
            }
            let alerts = try store.deliveries(sink: "parents")
            #expect(
                alerts.count == 6 && alerts.allSatisfy { (try? $0.event.detail?.contains("was not stored")) == true })
            // Known bad rows are not reported again; live events are still stored.
            try await post(base, "/_sim/burst?count=5")
            #expect(try await CatchUp(store: store, api: api).run().rejected == 0)
            #expect(try store.transactions(limit: 100).count == 35)
            #expect(try store.deliveries(sink: "parents").count == 6)
            // The same check on the hub path: a live TransactionCreated with an amount of 0 is set aside too.
            var live = try #require(try await api.transactions(child: alice, limit: 1, offset: 6).first)
            live.id = UUID()
            live.amount = 0
            #expect(
                try store.apply(.transactionCreated(live))
                    == .rejected(
                        reason: "transaction \(live.id.uuidString.lowercased()): its amount 0 is not above 0",
                        first: true))
        }
    }
}
