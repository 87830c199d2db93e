import Alerts
import AllowanceAPI
import Foundation
import Logging
import Store
import StoreContract
import Sync
import TestSupport
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// A backend restored from an older backup (same family, same children) no longer has transactions the cache holds.
/// Every catch-up checks for it; a child deleted on the server (the API's only delete) is not lost data.
@Suite(.serialized, .timeLimit(.minutes(1))) struct ReconcileTests {
    struct EverySyncConflict: AlertPlanner {
        func plan(_ e: RelayEvent) -> [PlannedDelivery] {
            e.kind == .syncConflict
                ? [PlannedDelivery(sink: "family-chat", rule: "r", kind: e.kind, urgency: .critical)] : []
        }
    }

    private func request(_ base: URL, _ method: String, _ path: String) async throws -> Int {
        var request = URLRequest(url: URL(string: base.absoluteString + path)!)
        request.httpMethod = method
        request.setValue("Bearer store-token", forHTTPHeaderField: "Authorization")
        let (_, response) = try await TestHTTP.data(for: request)
        return (response as? HTTPURLResponse)?.statusCode ?? 0
    }

    private func conflict(_ run: () async throws -> Void) async -> StoreError? {
        do {
            try await run()
            return nil
        } catch let error as StoreError {
            return error.isConflict ? error : nil
        } catch {
            return nil
        }
    }

    @Test func aServerRestoredFromAnOlderBackupIsAConflictAndTheCacheIsKept() async throws {
        try await withSimulator { base in
            let store = try Store.open(path: temporaryStorePath())
            let api = APIClient(baseURL: base, token: "store-token")
            try await post(base, "/_sim/burst?count=30")
            #expect(try await CatchUp(store: store, api: api, pageSize: 7).run().stored == 30)
            let before = try store.transactions(limit: 100)
            let balances = try store.children().map(\.currentBalance)
            #expect(try await request(base, "POST", "/_sim/restore?keep=12") == 200)
            let error = await conflict { _ = try await CatchUp(store: store, api: api, pageSize: 7).run() }
            let message = try #require(error?.message)
            #expect(message.contains("The server no longer has"), "\(message)")
            #expect(message.contains("run --rebuild"), "\(message)")
            #expect(try store.transactions(limit: 100) == before, "nothing dropped, nothing merged")
            #expect(try store.children().map(\.currentBalance) == balances)
        }
    }

    @Test func aRestoredServerThatWentOnWithNewTransactionsIsStillAConflict() async throws {
        try await withSimulator { base in
            let store = try Store.open(path: temporaryStorePath())
            let api = APIClient(baseURL: base, token: "store-token")
            try await post(base, "/_sim/burst?count=20")
            _ = try await CatchUp(store: store, api: api).run()
            #expect(try await request(base, "POST", "/_sim/restore?keep=10") == 200)
            try await post(base, "/_sim/burst?count=5")  // new ids, after the restore: the cursor is not among them
            let error = await conflict { _ = try await CatchUp(store: store, api: api).run() }
            #expect(error?.message.contains("The server no longer has") == true, "\(String(describing: error))")
            #expect(try store.transactions(limit: 100).count == 20)
        }
    }

    /// The transaction lost is newer than the last catch-up's cursor (it came live): the pages end at the cursor as
    /// usual, and it is not among them.
    @Test func aLostTransactionThatCameLiveIsMissedToo() async throws {
        try await withSimulator { base in
            let store = try Store.open(path: temporaryStorePath())
            let api = APIClient(baseURL: base, token: "store-token")
            try await post(base, "/_sim/burst?count=6")
            _ = try await CatchUp(store: store, api: api).run()
            try await post(base, "/_sim/burst?count=1")
            var newest: Transaction?
            for c in try await api.children() {
                if let t = try await api.transactions(child: c.id, limit: 1, offset: 0).first,
                    t.createdAt > (newest?.createdAt ?? .distantPast)
                {
                    newest = t
                }
            }
            let live = try #require(newest)
            #expect(try store.apply(.transactionCreated(live)) != .duplicate)
            #expect(try await request(base, "POST", "/_sim/restore?keep=6") == 200)
            let error = await conflict { _ = try await CatchUp(store: store, api: api).run() }
            let message = try #require(error?.message)
            #expect(message.contains("The server no longer has a transaction the cache holds"), "\(message)")
            #expect(message.contains(live.id.lowercased), "the evidence names the transaction: \(message)")
        }
    }

    /// A balance changed on the server without a transaction: read twice, the same evidence both times.
    @Test func aBalanceThatDoesNotAddUpIsAConflict() async throws {
        try await withSimulator { base in
            let store = try Store.open(path: temporaryStorePath())
            let api = APIClient(baseURL: base, token: "store-token")
            try await post(base, "/_sim/burst?count=9")
            _ = try await CatchUp(store: store, api: api).run()
            let child = try #require(try store.transactions(limit: 1).first?.childId)
            let cached = try #require(try store.children().first { $0.id == child }?.currentBalance)
            #expect(try await request(base, "POST", "/_sim/balance?child=\(child.lowercased)&balance=999.99") == 200)
            let error = await conflict { _ = try await CatchUp(store: store, api: api).run() }
            let message = try #require(error?.message)
            #expect(message.contains("do not add up") && message.contains("on the server is 999.99"), "\(message)")
            #expect(
                try store.children().first { $0.id == child }?.currentBalance == cached,
                "the server's balance is not taken")
        }
    }

    /// The first read of a balance can be a transaction made between the pages and the balances; the catch-up then
    /// reads once more and counts only the same evidence twice.
    @Test func aMismatchSeenOnceIsReadAgainNotCalledAConflict() throws {
        let store = try Store.open(path: temporaryStorePath())
        let t = Transaction(
            id: UUID(), childId: alice, amount: 2, type: .credit, description: "Chores", balanceAfter: 12,
            createdAt: Date(), createdByName: "P")
        try store.storeCaughtUp(
            children: [Child(id: alice, firstName: "Alice", lastName: "E", weeklyAllowance: 5, currentBalance: 12)],
            transactions: [t])
        let asked = Date()
        let right = [Child(id: alice, firstName: "Alice", lastName: "E", weeklyAllowance: 5, currentBalance: 12)]
        let wrong = [Child(id: alice, firstName: "Alice", lastName: "E", weeklyAllowance: 5, currentBalance: 15)]
        #expect(try store.balanceMismatches(right, askedAt: asked).isEmpty)
        let found = try store.balanceMismatches(wrong, askedAt: asked)
        #expect(
            found.map(\.newest) == [t.id.lowercased] && found.first?.evidence.contains("left it at 12.00") == true,
            "\(found)")
    }

    @Test func anUnchangedServerPassesEveryCheckAgainAndAgain() async throws {
        try await withSimulator { base in
            let store = try Store.open(path: temporaryStorePath())
            let api = APIClient(baseURL: base, token: "store-token")
            for _ in 0..<3 {
                try await post(base, "/_sim/burst?count=15")
                _ = try await CatchUp(store: store, api: api, pageSize: 4).run()
            }
            #expect(try store.transactions(limit: 100).count == 45)
        }
    }

    @Test func aChildDeletedOnTheServerIsRemovedNotAConflict() async throws {
        try await withSimulator { base in
            let store = try Store.open(path: temporaryStorePath())
            let api = APIClient(baseURL: base, token: "store-token")
            try await post(base, "/_sim/burst?count=12")
            _ = try await CatchUp(store: store, api: api).run()
            #expect(try store.children().map(\.firstName) == ["Alice", "Bob", "Carol"])
            #expect(try await request(base, "DELETE", "/api/v1/children/22222222-2222-4222-8222-222222222222") == 204)
            _ = try await CatchUp(store: store, api: api).run()
            #expect(try store.children().map(\.firstName) == ["Alice", "Carol"])
            #expect(try store.summary().children == 2)
        }
    }

    /// Through the sync engine: the same path as the other contradictions (sync `error`, one `sync.conflict` alert
    /// with the evidence, nothing stored after).
    @Test func theSyncEngineStopsWithOneConflictAlert() async throws {
        try await withSimulator { base in
            let store = try Store.open(path: temporaryStorePath())
            store.setPlanner(EverySyncConflict())
            let api = APIClient(baseURL: base, token: "store-token")
            try await post(base, "/_sim/burst?count=10")
            _ = try await CatchUp(store: store, api: api).run()
            #expect(try await request(base, "POST", "/_sim/restore?keep=3") == 200)
            var logger = Logger(label: "sync-test")
            logger.logLevel = .critical
            let sync = SyncCoordinator(store: store, api: api, catchUpSpacing: .zero, logger: logger)
            await sync.requestCatchUp()
            for _ in 0..<100 where try store.syncStatus()?.phase != .error {
                try await Task.sleep(for: .milliseconds(50))
            }
            #expect(try store.syncStatus()?.phase == .error)
            let alert = try #require(try store.deliveries(sink: "family-chat").first)
            #expect(try alert.event.detail?.contains("The server no longer has 7 transactions") == true)
            await sync.requestCatchUp()
            try await post(base, "/_sim/burst?count=2")
            #expect(try store.deliveries(sink: "family-chat").count == 1)
            #expect(try store.transactions(limit: 100).count == 10)
        }
    }
}
