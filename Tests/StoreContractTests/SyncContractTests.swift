import Alerts
import AllowanceAPI
import Foundation
import Logging
import StoreContract
import Sync
import TestSupport
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The one sync engine on both stores, against the in-process simulator: what a catch-up stores and alerts, and
/// every check it makes (lost data, deleted children, rows set aside, another server), with the same answers on the
/// SQLite file and on PostgreSQL. The oracle is the simulator's own record (its REST answers and `/_sim` switches).
@Suite(.serialized, .timeLimit(.minutes(2))) struct SyncContractTests {
    /// Every alert to `hook`, but what the family's history holds (as `relay.history: none` does).
    struct NotHistory: AlertPlanner {
        func plan(_ event: RelayEvent) -> [PlannedDelivery] {
            event.history ? [] : [PlannedDelivery(sink: "hook", rule: "all", kind: event.kind, urgency: .normal)]
        }
    }

    /// A new store on `backend` and a simulator whose family has `history` transactions from before it.
    func withBackend(
        _ backend: Backend, history: Int = 0, _ body: (any RelayStorage, APIClient, URL) async throws -> Void
    ) async throws {
        let stores = try await backend.handles(1, planner: NotHistory())
        defer { backend.close(stores) }
        try await withSimulator(token: "contract-token", { $0.history = history }) { base in
            try await body(stores[0], APIClient(baseURL: base, token: "contract-token"), base)
        }
    }

    func post(_ base: URL, _ path: String, method: String = "POST") async throws -> Int {
        var request = URLRequest(url: URL(string: base.absoluteString + path)!)
        request.httpMethod = method
        request.setValue("Bearer contract-token", forHTTPHeaderField: "Authorization")
        let (_, response) = try await TestHTTP.data(for: request)
        return (response as? HTTPURLResponse)?.statusCode ?? 0
    }

    func serverIds(_ api: APIClient) async throws -> Set<UUID> {
        var ids = Set<UUID>()
        for child in try await api.children() {
            ids.formUnion(try await api.transactions(child: child.id, limit: 1000, offset: 0).map(\.id))
        }
        return ids
    }

    /// The store caught up, then one more transaction made on the server (not yet in the store): its child and it.
    /// For a family without history (`withBackend`'s default), where it is the server's only transaction.
    func caughtUpThenOneMore(
        _ store: any RelayStorage, _ api: APIClient, _ base: URL
    ) async throws -> (
        Child, Transaction
    ) {
        _ = try await CatchUp(store: store, api: api).run()
        #expect(try await post(base, "/_sim/burst?count=1") == 200)
        var found: (Child, Transaction)?
        for child in try await api.children() {
            if let t = try await api.transactions(child: child.id, limit: 1, offset: 0).first { found = (child, t) }
        }
        return try #require(found)
    }

    func alerted(_ store: any RelayStorage) throws -> [Delivery] {
        try store.deliveries(sink: "hook", state: nil, limit: 1000)
    }

    @Test(arguments: Backend.allCases)
    func theHistoryIsTakenWithoutAlertsThenWhatWasMissedIsAlertedOnce(_ backend: Backend) async throws {
        try await withBackend(backend, history: 25) { store, api, base in
            #expect(try !store.hasCaughtUp())
            let first = try await CatchUp(store: store, api: api, pageSize: 7).run()
            #expect(first.stored == 25)
            #expect(try store.hasCaughtUp())
            #expect(try store.historyTaken()?.transactions == 25)
            #expect(try alerted(store).isEmpty, "the family's history is not alerted")
            #expect(try await post(base, "/_sim/burst?count=6") == 200)
            let second = try await CatchUp(store: store, api: api, pageSize: 7).run()
            #expect(second.stored == 6, "only what is new")
            let alerts = try alerted(store)
            #expect(alerts.filter { $0.kind == .transactionCreated }.count == 6)
            #expect(Set(try alerts.compactMap { try $0.event.transaction?.id }).isSubset(of: try await serverIds(api)))
            #expect(try await CatchUp(store: store, api: api).run().stored == 0, "caught up: nothing twice")
            #expect(try alerted(store).count == alerts.count)
            // The server's balances, as its REST API answers them.
            for child in try await api.children() {
                #expect(try store.children().first { $0.id == child.id }?.currentBalance == child.currentBalance)
            }
        }
    }

    @Test(arguments: Backend.allCases)
    func aServerRestoredFromAnOlderBackupIsAConflictAndNothingIsMerged(_ backend: Backend) async throws {
        try await withBackend(backend) { store, api, base in
            #expect(try await post(base, "/_sim/burst?count=30") == 200)
            _ = try await CatchUp(store: store, api: api, pageSize: 7).run()
            let before = try store.transactions(child: nil, since: nil, limit: 100)
            #expect(try await post(base, "/_sim/restore?keep=12") == 200)
            do {
                _ = try await CatchUp(store: store, api: api, pageSize: 7).run()
                Issue.record("a restored server was merged")
            } catch let error as StoreError {
                #expect(error.isConflict && error.message.contains("The server no longer has"), "\(error)")
                #expect(error.message.contains("run --rebuild"))
            }
            #expect(try store.transactions(child: nil, since: nil, limit: 100) == before, "nothing dropped or merged")
        }
    }

    @Test(arguments: Backend.allCases)
    func aChildDeletedOnTheServerIsRemovedNotLost(_ backend: Backend) async throws {
        try await withBackend(backend) { store, api, base in
            #expect(try await post(base, "/_sim/burst?count=12") == 200)
            _ = try await CatchUp(store: store, api: api).run()
            #expect(try store.children().map(\.firstName).sorted() == ["Alice", "Bob", "Carol"])
            let bob = "22222222-2222-4222-8222-222222222222"
            #expect(try await post(base, "/api/v1/children/\(bob)", method: "DELETE") == 204)
            _ = try await CatchUp(store: store, api: api).run()
            #expect(try store.children().map(\.firstName).sorted() == ["Alice", "Carol"])
            #expect(try store.summary().children == 2)
        }
    }

    @Test(arguments: Backend.allCases)
    func rowsTheRelayCannotKeepAreSetAsideOnceWithAnAlertEach(_ backend: Backend) async throws {
        try await withBackend(backend) { store, api, base in
            _ = try await CatchUp(store: store, api: api).run()
            let alice = "11111111-1111-4111-8111-111111111111"
            #expect(
                try await post(base, "/_sim/badrow?child=\(alice)&id=00000000-0000-4000-8000-000000000001&amount=0")
                    == 200)
            #expect(try await post(base, "/_sim/burst?count=4") == 200)
            let report = try await CatchUp(store: store, api: api).run()
            #expect(report.rejected == 1 && report.stored == 4, "\(report)")
            #expect(try store.rejectedRows().map(\.reason) == ["its amount 0 is not above 0"])
            #expect(try alerted(store).filter { $0.kind == .syncRejected }.count == 1)
            #expect(try await CatchUp(store: store, api: api).run().rejected == 0, "reported once")
            // A live event the relay cannot keep is set aside the same way.
            var live = try #require(
                try await api.transactions(child: UUID(uuidString: alice)!, limit: 1, offset: 0).first)
            live.id = UUID()
            live.amount = 0
            #expect(
                try store.apply([.transactionCreated(live)], at: Date(), traceParents: []) == [
                    .rejected(
                        reason: "transaction \(live.id.uuidString.lowercased()): its amount 0 is not above 0",
                        first: true)
                ])
        }
    }

    /// Money the cache cannot hold in cents, on either store: a BalanceUpdated with a third decimal is set aside (once
    /// for that figure, with an alert) and the events around it are stored; a catch-up with such a child is refused
    /// whole, with the same words, and nothing of it is stored.
    @Test(arguments: Backend.allCases)
    func moneyWithAThirdDecimalIsSetAsideLiveAndRefusedInACatchUp(_ backend: Backend) async throws {
        try await withBackend(backend) { store, api, base in
            let (child, newest) = try await caughtUpThenOneMore(store, api, base)
            let cached = try #require(try store.children().first { $0.id == child.id }?.currentBalance)
            let odd = Decimal(string: "12.345")!
            let lower = child.id.uuidString.lowercased()
            let results = try store.apply(
                [.transactionCreated(newest), .balanceUpdated(childId: child.id, balance: odd)], at: Date(),
                traceParents: [])
            guard results.count == 2, case .stored = results[0] else {
                Issue.record("the transaction before it was not stored: \(results)")
                return
            }
            #expect(
                results[1]
                    == .rejected(
                        reason: "balance for child \(lower): its balance 12.345 has more than two decimals", first: true
                    ))
            let kept = try #require(try store.children().first { $0.id == child.id }?.currentBalance)
            #expect(kept == newest.balanceAfter && kept != cached, "the transaction's balance, not the odd one")
            #expect(try store.rejectedRows().map(\.id) == ["balance:\(lower):12.345"])
            #expect(
                try store.apply([.balanceUpdated(childId: child.id, balance: odd)], at: Date(), traceParents: [])
                    == [
                        .rejected(
                            reason: "balance for child \(lower): its balance 12.345 has more than two decimals",
                            first: false)
                    ])
            let alerts = try alerted(store)
            #expect(alerts.filter { $0.kind == .syncRejected }.count == 1)
            #expect(!alerts.contains { $0.kind == .balanceUpdated && (try? $0.event.balance) == odd })

            var oddChild = child
            oddChild.currentBalance = odd
            #expect(try store.balanceMismatches([oddChild], askedAt: Date()).isEmpty, "no evidence either way")
            var unkept = child
            unkept.weeklyAllowance = Decimal(string: "5.125")!
            var fresh = newest
            fresh.id = UUID()
            let stored = try store.transactions(child: nil, since: nil, limit: 1000).count
            do {
                _ = try store.storeCaughtUp(
                    children: [unkept], transactions: [fresh], rejected: [], cursors: [:], complete: true,
                    balancesAskedAt: nil, history: false, historyTaken: nil, at: Date(), traceParent: nil)
                Issue.record("a child with a third decimal was stored")
            } catch let error as StoreError {
                #expect(
                    error.message.hasPrefix(
                        "the server's child \(lower) (\(child.firstName)) cannot be kept: its weeklyAllowance 5.125 has more than two decimals"
                    ),
                    "\(error)")
            }
            #expect(try store.transactions(child: nil, since: nil, limit: 1000).count == stored, "nothing of it")
            #expect(try store.children().first { $0.id == child.id }?.currentBalance == kept)
        }
    }

    /// The server a cache is bound to: the same family at a new address carries on (with a note), another family
    /// or, without account ids, another address is a conflict; nothing is recorded for a refused one.
    @Test(arguments: Backend.allCases)
    func theCacheIsBoundToItsFamilysServer(_ backend: Backend) async throws {
        let stores = try await backend.handles(1)
        defer { backend.close(stores) }
        let store = stores[0]
        let home = ServerIdentity(url: URL(string: "https://allowance.example")!, userId: "u1", familyId: "f1")
        #expect(try store.bindServer(home) == nil)
        #expect(try store.bindServer(home) == nil)
        let moved = ServerIdentity(url: URL(string: "https://money.example/")!, userId: "u1", familyId: "f1")
        #expect(
            try store.bindServer(moved)?.contains("moved from https://allowance.example to https://money.example")
                == true)
        for other in [
            ServerIdentity(url: URL(string: "https://money.example")!, userId: "u2", familyId: "f2"),
            ServerIdentity(url: URL(string: "https://elsewhere.example")!),
        ] {
            do {
                _ = try store.bindServer(other)
                Issue.record("\(other.url) was taken")
            } catch {
                #expect(error.isConflict && error.message.contains("run --rebuild"), "\(error)")
            }
        }
        #expect(try store.bindServer(moved) == nil, "still bound to the family at its new address")
    }

    @Test(arguments: Backend.allCases)
    func hubEventsAreStoredOnceWithTheirAlertsAndAGapAsksForACatchUp(_ backend: Backend) async throws {
        try await withBackend(backend) { store, api, base in
            // The server's newest transaction, as the hub would push it, with its balance right behind it.
            let (child, newest) = try await caughtUpThenOneMore(store, api, base)
            let alice = child.id
            let cached = try store.children().first { $0.id == alice }?.currentBalance
            let gap = cached.map {
                $0 != newest.balanceAfter - (newest.type == .credit ? newest.amount : -newest.amount)
            }
            let results = try store.apply(
                [.transactionCreated(newest), .balanceUpdated(childId: alice, balance: child.currentBalance)],
                at: Date(),
                traceParents: [])
            #expect(results.first == .stored(gap: gap == true ? alice : nil))
            #expect(try store.apply([.transactionCreated(newest)], at: Date(), traceParents: []) == [.duplicate])
            #expect(try store.children().first { $0.id == alice }?.currentBalance == child.currentBalance)
            let kinds = try alerted(store).map(\.kind)
            #expect(kinds.filter { $0 == .transactionCreated }.count == 1 && kinds.contains(.balanceUpdated))
            // The same id with other content is another server's data: the whole burst is refused, nothing stored.
            var forged = newest
            forged.amount += 1
            var fresh = newest
            fresh.id = UUID()
            let stored = try store.transactions(child: nil, since: nil, limit: 1000).count
            do {
                _ = try store.apply(
                    [.transactionCreated(fresh), .transactionCreated(forged)], at: Date(), traceParents: [])
                Issue.record("a contradiction was stored")
            } catch let error as StoreError {
                #expect(error.isConflict && error.message.contains("contradicts the cache"), "\(error)")
            }
            #expect(try store.transactions(child: nil, since: nil, limit: 1000).count == stored, "nothing of the burst")
            // An id the cache has never seen, for a child it does not know: a catch-up is due.
            var stranger = newest
            stranger.id = UUID()
            stranger.childId = UUID()
            guard case .needsCatchUp = try store.apply([.transactionCreated(stranger)], at: Date(), traceParents: [])[0]
            else {
                Issue.record("an unknown child's transaction was stored")
                return
            }
        }
    }
}
