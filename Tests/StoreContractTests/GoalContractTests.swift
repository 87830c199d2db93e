import Alerts
import AllowanceAPI
import Foundation
import StoreContract
import Testing

/// The wish lists, once, on both stores: the first list is the starting point, a balance reaching a price alerts
/// once per crossing (inside the transaction that stores the balance), a purchase alerts once, and an item gone from
/// the server's list is gone from the cache.
@Suite(.timeLimit(.minutes(2))) struct GoalContractTests {
    let alice = Child(id: UUID(), firstName: "Alice", lastName: "A", weeklyAllowance: 5, currentBalance: 10)

    func item(_ name: String, _ price: Decimal, purchased: Bool = false, id: UUID = UUID()) -> WishListItem {
        WishListItem(
            id: id, childId: alice.id, name: name, price: price, url: "https://shop.example/\(name)",
            isPurchased: purchased, purchasedAt: purchased ? Date() : nil)
    }

    /// A transaction of Alice's on the hub, with the balance after it as the server computed it.
    func move(_ store: any RelayStorage, _ amount: Decimal, after balance: Decimal) throws {
        let t = Transaction(
            id: UUID(), childId: alice.id, amount: amount < 0 ? -amount : amount, type: amount < 0 ? .debit : .credit,
            description: "move", balanceAfter: balance, createdAt: Date(), createdByName: "Mum")
        _ = try store.apply(
            [.transactionCreated(t), .balanceUpdated(childId: alice.id, balance: balance)], at: Date(), traceParents: []
        )
    }

    /// The goal alerts planned so far, oldest first (by time-ordered id: alerts of one transaction share a moment),
    /// as "kind item progress".
    func goalAlerts(_ store: any RelayStorage) throws -> [String] {
        try store.deliveries(sink: "hook", state: nil, limit: 1000).sorted { $0.id < $1.id }
            .filter { $0.kind == .goalReached || $0.kind == .goalPurchased }
            .compactMap { d -> String? in
                // Read with Foundation's JSON, not the relay's reader.
                guard let alert = try? JSONSerialization.jsonObject(with: Data(d.alert.utf8)) as? [String: Any],
                    let goal = alert["goal"] as? [String: Any]
                else { return nil }
                return "\(d.kind.rawValue) \(goal["name"] ?? "") \(goal["progress"] ?? "")"
            }
    }

    @Test(arguments: Backend.allCases)
    func aBalanceReachingAPriceAlertsOncePerCrossing(_ backend: Backend) async throws {
        let stores = try await backend.handles(1, planner: EveryEvent())
        defer { backend.close(stores) }
        let store = stores[0]
        try backend.seed(store, children: [alice], transactions: [])
        let helmet = item("helmet", 15)
        #expect(try store.storeWishList(child: alice.id, items: [helmet, item("book", 8)], at: Date()) == 0)
        #expect(try goalAlerts(store).isEmpty, "the first list is the starting point: the book was within reach")
        try move(store, 6, after: 16)
        #expect(try goalAlerts(store) == ["goal.reached helmet 100"])
        try move(store, 1, after: 17)
        #expect(try goalAlerts(store).count == 1, "still above: no second alert")
        try move(store, -3, after: 14)
        try move(store, 2, after: 16)
        #expect(
            try goalAlerts(store) == ["goal.reached helmet 100", "goal.reached helmet 100"],
            "fell below and reached it again: again")
        let goals = try store.goals(child: alice.id)
        #expect(goals.map(\.item.name) == ["book", "helmet"] && goals.allSatisfy(\.reached))
    }

    @Test(arguments: Backend.allCases)
    func aPurchaseANewItemWithinReachAndARemovalAreEachSaidOnce(_ backend: Backend) async throws {
        let stores = try await backend.handles(1, planner: EveryEvent())
        defer { backend.close(stores) }
        let store = stores[0]
        try backend.seed(store, children: [alice], transactions: [])
        let kite = item("kite", 4)
        let bike = item("bike", 120)
        try store.storeWishList(child: alice.id, items: [kite, bike], at: Date())
        var bought = kite
        bought.isPurchased = true
        bought.purchasedAt = Date()
        let ball = item("ball", 6)
        #expect(try store.storeWishList(child: alice.id, items: [bought, ball], at: Date()) == 2)
        #expect(try goalAlerts(store).sorted() == ["goal.purchased kite 100", "goal.reached ball 100"])
        try store.storeWishList(child: alice.id, items: [bought, ball], at: Date())
        #expect(try goalAlerts(store).count == 2, "the same list again says nothing")
        #expect(try store.goals(child: alice.id).map(\.item.name) == ["kite", "ball"], "the bike left the list")
        try move(store, 200, after: 210)
        #expect(try goalAlerts(store).count == 2, "a bought item is no goal, and the ball was reached already")
    }

    /// A relay started again on the same database (another handle) knows the goals stored before: its first
    /// balance compares with them.
    @Test(arguments: Backend.allCases)
    func goalsStoredBeforeARestartAreComparedAfterIt(_ backend: Backend) async throws {
        let stores = try await backend.handles(2, planner: EveryEvent())
        defer { backend.close(stores) }
        try backend.seed(stores[0], children: [alice], transactions: [])
        try stores[0].storeWishList(child: alice.id, items: [item("helmet", 15)], at: Date())
        try move(stores[1], 6, after: 16)
        #expect(try goalAlerts(stores[1]) == ["goal.reached helmet 100"])
    }

    /// Replicas on one PostgreSQL database take turns: a list another replica stored between two bursts, or a
    /// purchase, counts at the next burst (each burst reads whether the child has goals with the child's lock).
    @Test func aListAnotherReplicaStoredCountsAtTheNextBurst() async throws {
        let backend = Backend.postgres
        let stores = try await backend.handles(2, planner: EveryEvent())
        defer { backend.close(stores) }
        try backend.seed(stores[0], children: [alice], transactions: [])
        try move(stores[0], 1, after: 11)
        #expect(try goalAlerts(stores[0]).isEmpty, "no list yet")
        let helmet = item("helmet", 15)
        try stores[1].storeWishList(child: alice.id, items: [helmet], at: Date())
        try move(stores[0], 5, after: 16)
        #expect(try goalAlerts(stores[0]) == ["goal.reached helmet 100"])
        var bought = helmet
        bought.isPurchased = true
        bought.purchasedAt = Date()
        try stores[1].storeWishList(child: alice.id, items: [bought, item("bike", 30)], at: Date())
        try move(stores[0], -10, after: 6)
        try move(stores[0], 25, after: 31)
        #expect(
            try goalAlerts(stores[0]) == [
                "goal.reached helmet 100", "goal.purchased helmet 100", "goal.reached bike 100",
            ],
            "the bought helmet is no goal; the bike, added by the other replica, is")
    }

    @Test(arguments: Backend.allCases)
    func aChildTheCacheDoesNotHoldKeepsNoList(_ backend: Backend) async throws {
        let stores = try await backend.handles(1, planner: EveryEvent())
        defer { backend.close(stores) }
        let store = stores[0]
        let stranger = WishListItem(id: UUID(), childId: UUID(), name: "x", price: 1)
        #expect(try store.storeWishList(child: stranger.childId, items: [stranger], at: Date()) == 0)
        #expect(try store.goals(child: nil).isEmpty)
    }
}
