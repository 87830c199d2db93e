import Alerts
import AllowanceAPI
import Core
import Foundation
import PostgresTransport
import StoreContract

/// The wish lists on PostgreSQL, as the SQLite file keeps them (`GoalPolicy` decides for both): read by the link
/// holder over REST, compared with each balance inside the transaction that stores it, so a goal reached is alerted
/// once whichever replica stored the balance.
extension SharedRelayStore: GoalStore {
    static let goalTables = PostgresMigration(
        6, "wish lists",
        """
        CREATE TABLE relay_wish_item (
            id text PRIMARY KEY, child_id text NOT NULL, name text NOT NULL, price_minor bigint NOT NULL, url text,
            notes text, purchased boolean NOT NULL DEFAULT false, purchased_at timestamptz,
            reached boolean NOT NULL DEFAULT false);
        CREATE INDEX relay_wish_item_child ON relay_wish_item (child_id, price_minor);
        ALTER TABLE relay_child ADD COLUMN wish_list_at timestamptz
        """)

    public func goals(child: UUID? = nil) throws(StoreError) -> [GoalRow] {
        try working { db throws(PostgresError) in try Self.goals(db, child: child) }
    }

    @discardableResult
    public func storeWishList(child: UUID, items: [WishListItem], at now: Date = Date()) throws(StoreError) -> Int {
        try writing { db throws(PostgresError) -> Int in
            guard
                let row = try db.query(
                    "SELECT name, balance_minor, wish_list_at IS NULL FROM relay_child WHERE id = $1 FOR UPDATE",
                    [child.lowercased]
                ).rows.first
            else { return 0 }  // a child the cache does not hold (yet): its list is read after the next catch-up
            let balance = Int64(row[1] ?? "") ?? 0
            let first = row[2] == "t"  // no list read yet: the first list alerts nothing
            let cached = try Self.goals(db, child: child)
            let (rows, gone, events) = GoalPolicy.listed(
                items, cached: cached, balance: Money.decimal(cents: balance), childName: row[0], first: first, at: now)
            if !gone.isEmpty {
                try db.query(
                    "DELETE FROM relay_wish_item WHERE id = ANY($1::text[])", [Self.array(gone.map(\.lowercased))])
            }
            for g in rows where cached.first(where: { $0.item.id == g.item.id }) != g {
                try db.query(
                    """
                    INSERT INTO relay_wish_item (id, child_id, name, price_minor, url, notes, purchased, purchased_at, reached)
                    VALUES ($1, $2, $3, $4, $5, $6, $7, $8::timestamptz, $9)
                    ON CONFLICT (id) DO UPDATE SET child_id = EXCLUDED.child_id, name = EXCLUDED.name,
                        price_minor = EXCLUDED.price_minor, url = EXCLUDED.url, notes = EXCLUDED.notes,
                        purchased = EXCLUDED.purchased, purchased_at = EXCLUDED.purchased_at, reached = EXCLUDED.reached
                    """,
                    [
                        g.item.id.lowercased, child.lowercased, g.item.name,
                        Money.minorUnits(g.item.price).map(String.init) ?? "0", g.item.url, g.item.notes,
                        g.item.isPurchased ? "true" : "false", g.item.purchasedAt.map(ISODate.string),
                        g.reached ? "true" : "false",
                    ])
            }
            if first {  // only whether a list was ever read is asked, as in the SQLite store
                try db.query(
                    "UPDATE relay_child SET wish_list_at = $1::timestamptz WHERE id = $2",
                    [ISODate.string(now), child.lowercased])
            }
            var planned = 0
            for e in events { planned += try plan(db, e, now: now) }
            if planned > 0 { try db.notify(Self.channel) }
            return planned
        }
    }

    /// Compares a balance `event` is about to store with the child's goals, inside its transaction: each flip is
    /// written, and each goal reached is returned to be planned after the event's own alerts.
    func goalsReached(_ db: PostgresConnection, by event: RelayEvent) throws(PostgresError) -> [RelayEvent] {
        guard GoalPolicy.movesBalance(event), let child = event.childId else { return [] }
        let goals = try Self.goals(db, child: child, unpurchasedOnly: true)
        guard !goals.isEmpty else { return [] }
        let (flips, events) = GoalPolicy.balanceMoved(goals, by: event)
        for flip in flips {
            try db.query(
                "UPDATE relay_wish_item SET reached = $1 WHERE id = $2",
                [flip.reached ? "true" : "false", flip.id.lowercased])
        }
        return events
    }

    static func goals(
        _ db: PostgresConnection, child: UUID?, unpurchasedOnly: Bool = false
    ) throws(PostgresError) -> [GoalRow] {
        let purchased = unpurchasedOnly ? "AND NOT purchased" : ""
        let columns =
            "id, child_id, name, price_minor, url, notes, purchased, extract(epoch FROM purchased_at), reached"
        let rows: PostgresRows
        if let child {
            rows = try db.query(
                "SELECT \(columns) FROM relay_wish_item WHERE child_id = $1 \(purchased) ORDER BY price_minor, name",
                [child.lowercased])
        } else {
            rows = try db.query(
                "SELECT \(columns) FROM relay_wish_item WHERE true \(purchased) ORDER BY child_id, price_minor, name")
        }
        return rows.rows.compactMap { r -> GoalRow? in
            guard let id = r[0].flatMap(UUID.init(uuidString:)), let childId = r[1].flatMap(UUID.init(uuidString:)),
                let name = r[2], let price = r[3].flatMap(Int64.init)
            else { return nil }
            let item = WishListItem(
                id: id, childId: childId, name: name, price: Money.decimal(cents: price), url: r[4], notes: r[5],
                isPurchased: r[6] == "t",
                purchasedAt: r[7].flatMap(Double.init).map(Date.init(timeIntervalSince1970:)))
            return GoalRow(item: item, reached: r[8] == "t")
        }
    }
}
