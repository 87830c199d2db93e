import Alerts
import AllowanceAPI
import Foundation
import GRDB
import StoreContract

extension Store {
    public func goals(child: UUID? = nil) throws(StoreError) -> [GoalRow] {
        try read { db in try Self.goals(db, child: child) }
    }

    @discardableResult
    public func storeWishList(child: UUID, items: [WishListItem], at now: Date = Date()) throws(StoreError) -> Int {
        try write { db in
            guard
                let row = try Row.fetchOne(
                    db.cachedStatement(
                        sql: "SELECT first_name, \(Self.balanceSQL) AS balance, wish_list_at FROM child WHERE id = ?"),
                    arguments: [child.lowercased])
            else { return 0 }  // a child the cache does not hold (yet): its list is read after the next catch-up
            let balance: Int64 = row["balance"]
            let first = (row["wish_list_at"] as String?) == nil
            let cached = try Self.goals(db, child: child)
            let (rows, gone, events) = GoalPolicy.listed(
                items, cached: cached, balance: Money.decimal(cents: balance), childName: row["first_name"],
                first: first, at: now)
            for id in gone { try db.execute(sql: "DELETE FROM wish_item WHERE id = ?", arguments: [id.lowercased]) }
            for g in rows where cached.first(where: { $0.item.id == g.item.id }) != g {
                try db.execute(
                    sql: """
                        INSERT INTO wish_item (id, child_id, name, price_minor, url, notes, purchased, purchased_at, reached)
                        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
                        ON CONFLICT(id) DO UPDATE SET child_id = excluded.child_id, name = excluded.name,
                            price_minor = excluded.price_minor, url = excluded.url, notes = excluded.notes,
                            purchased = excluded.purchased, purchased_at = excluded.purchased_at, reached = excluded.reached
                        """,
                    arguments: [
                        g.item.id.lowercased, child.lowercased, g.item.name, Money.minorUnits(g.item.price),
                        g.item.url, g.item.notes, g.item.isPurchased, g.item.purchasedAt.map(ISO.string), g.reached,
                    ])
            }
            // Only whether a list was ever read is asked: a list read again unchanged (after every balance that
            // moved) writes nothing, and commits no page.
            if first {
                try db.execute(
                    sql: "UPDATE child SET wish_list_at = ? WHERE id = ?",
                    arguments: [ISO.string(now), child.lowercased])
            }
            var planned = 0
            for e in events { planned += try planDeliveries(db, e, now: now) }
            // Last, once nothing can fail but the commit: the set is loaded from the file before this list changes
            // it, then kept up to date.
            _ = try hasGoals(db, child)
            let wanted = rows.contains { !$0.item.isPurchased }
            goalChildren.withLock { known in
                if wanted { known?.insert(child) } else { known?.remove(child) }
            }
            return planned
        }
    }

    /// Compares a balance `event` is about to store with the child's goals, inside its transaction: each flip is
    /// written, and a goal reached plans its alert (after the event's own).
    func goalsReached(_ db: Database, by event: RelayEvent) throws -> [RelayEvent] {
        guard GoalPolicy.movesBalance(event), let child = event.childId, try hasGoals(db, child) else { return [] }
        let goals = try Self.goals(db, child: child, unpurchasedOnly: true)
        guard !goals.isEmpty else { return [] }
        let (flips, events) = GoalPolicy.balanceMoved(goals, by: event)
        for flip in flips {
            try db.executeCached(
                sql: "UPDATE wish_item SET reached = ? WHERE id = ?", arguments: [flip.reached, flip.id.lowercased])
        }
        return events
    }

    /// Whether the child has an item not bought yet: a balance stored for it is compared with the goals even when
    /// no rule takes the event itself. From memory (`goalChildren`), read from the file once.
    func hasGoals(_ db: Database, _ child: UUID) throws -> Bool {
        if let known = goalChildren.withLock({ $0 }) { return known.contains(child) }
        let ids = try String.fetchAll(db, sql: "SELECT DISTINCT child_id FROM wish_item WHERE purchased = 0")
        let known = Set(ids.compactMap(UUID.init(uuidString:)))
        goalChildren.withLock { $0 = known }
        return known.contains(child)
    }

    static func goals(_ db: Database, child: UUID?, unpurchasedOnly: Bool = false) throws -> [GoalRow] {
        let purchased = unpurchasedOnly ? "AND purchased = 0" : ""
        let sql =
            child == nil
            ? "SELECT * FROM wish_item WHERE 1 = 1 \(purchased) ORDER BY child_id, price_minor, name"
            : "SELECT * FROM wish_item WHERE child_id = ? \(purchased) ORDER BY price_minor, name"
        return try Row.fetchAll(
            try db.cachedStatement(sql: sql), arguments: StatementArguments(child.map { [$0.lowercased] } ?? [])
        ).compactMap { row -> GoalRow? in
            guard let id = UUID(uuidString: row["id"]), let childId = UUID(uuidString: row["child_id"]) else {
                return nil
            }
            let item = WishListItem(
                id: id, childId: childId, name: row["name"], price: Money.decimal(cents: row["price_minor"]),
                url: row["url"], notes: row["notes"], isPurchased: row["purchased"],
                purchasedAt: (row["purchased_at"] as String?).flatMap(ISODate.parse))
            return GoalRow(item: item, reached: row["reached"])
        }
    }
}
