import Alerts
import AllowanceAPI
import Foundation

/// A wish list item as the cache keeps it: the server's item, and whether the child's balance has reached its price
/// (the state `goal.reached` fires on, once per crossing).
public struct GoalRow: Sendable, Equatable {
    public var item: WishListItem
    public var reached: Bool

    public init(item: WishListItem, reached: Bool) {
        self.item = item
        self.reached = reached
    }

    /// How far `balance` is towards the item, in whole percent (100 once bought).
    public func progress(balance: Decimal) -> Int {
        item.isPurchased ? 100 : Goal.progress(balance: balance, price: item.price)
    }
}

/// The wish lists the cache keeps. The hub says nothing of them: they are read over REST (`WishListRefresh`), and
/// a balance stored from the hub is compared with them inside the transaction that stores it.
public protocol GoalStore: Sendable {
    /// The wish list items the cache holds, bought ones included (of `child`, or of every child), by child and price.
    func goals(child: UUID?) throws(StoreError) -> [GoalRow]
    /// Stores a child's wish list as the server listed it just now, in one transaction: an item gone from the list is
    /// dropped, `goal.purchased` is planned for one that became bought and `goal.reached` for one the balance reached
    /// meanwhile (a new item, a lower price). The first list stored for a child is the starting point: it alerts
    /// nothing. Returns how many alerts were planned.
    @discardableResult
    func storeWishList(child: UUID, items: [WishListItem], at now: Date) throws(StoreError) -> Int
}

/// When a goal is reached or bought: the one policy both stores follow inside the transaction that stores the
/// balance or the list. The rows are the backend's.
public enum GoalPolicy {
    /// Whether `event` moves a child's balance (a transaction, a BalanceUpdated): the goals are looked at.
    public static func movesBalance(_ event: RelayEvent) -> Bool {
        (event.kind == .transactionCreated || event.kind == .balanceUpdated) && event.childId != nil
            && event.balance != nil
    }

    /// For an event that moved the balance: the goals whose state flips (reached or not any more), and a
    /// `goal.reached` for each one the balance reached. Falling below a price and reaching it again alerts again.
    public static func balanceMoved(
        _ goals: [GoalRow], by event: RelayEvent
    ) -> (
        flips: [(id: UUID, reached: Bool)], events: [RelayEvent]
    ) {
        guard let balance = event.balance else { return ([], []) }
        var flips: [(id: UUID, reached: Bool)] = []
        var events: [RelayEvent] = []
        for g in goals where !g.item.isPurchased {
            let now = balance >= g.item.price
            guard now != g.reached else { continue }
            flips.append((g.item.id, now))
            if now { events.append(reached(g.item, balance: balance, from: event)) }
        }
        return (flips, events)
    }

    /// A child's list as the server sent it, against what the cache holds: the rows to keep (with their state), the
    /// ids to drop, and the alerts. `balance`: the child's cached balance (nil: not known, nothing is reached).
    /// `first`: the first list of this child, stored as the starting point without alerts.
    public static func listed(
        _ server: [WishListItem], cached: [GoalRow], balance: Decimal?, childName: String?, first: Bool, at now: Date
    ) -> (rows: [GoalRow], gone: [UUID], events: [RelayEvent]) {
        let known = Dictionary(cached.map { ($0.item.id, $0) }, uniquingKeysWith: { a, _ in a })
        var rows: [GoalRow] = []
        var events: [RelayEvent] = []
        for item in server {
            let was = known[item.id]
            let reached = !item.isPurchased && balance.map { $0 >= item.price } ?? false
            rows.append(GoalRow(item: item, reached: item.isPurchased ? (was?.reached ?? false) : reached))
            guard !first else { continue }
            if item.isPurchased, let was, !was.item.isPurchased {
                var e = RelayEvent(
                    kind: .goalPurchased, at: item.purchasedAt ?? now, childId: item.childId, childName: childName,
                    balance: balance)
                e.goal = Goal(id: item.id, name: item.name, price: item.price, url: item.url, progress: 100)
                events.append(e)
            } else if reached, was.map({ !$0.reached || $0.item.isPurchased }) ?? true, let balance {
                var source = RelayEvent(
                    kind: .balanceUpdated, at: now, childId: item.childId, childName: childName, balance: balance)
                source.caughtUp = true
                events.append(Self.reached(item, balance: balance, from: source))
            }
        }
        let listed = Set(server.map(\.id))
        return (rows, cached.map(\.item.id).filter { !listed.contains($0) }, events)
    }

    private static func reached(_ item: WishListItem, balance: Decimal, from event: RelayEvent) -> RelayEvent {
        var e = RelayEvent(
            kind: .goalReached, at: event.at, childId: item.childId, childName: event.childName, balance: balance,
            previousBalance: event.previousBalance, caughtUp: event.caughtUp)
        e.history = event.history
        e.traceParent = event.traceParent
        e.goal = Goal(id: item.id, name: item.name, price: item.price, url: item.url, progress: 100)
        return e
    }
}
