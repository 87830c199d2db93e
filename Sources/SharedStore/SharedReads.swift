import Alerts
import AllowanceAPI
import Core
import Foundation
import PostgresTransport
import StoreContract

/// What `status`, `transactions`, `deliveries list` and `outbox list` read of the shared store, and the replicas'
/// own rows.
extension SharedRelayStore {
    /// Per sink: how many deliveries are in each state (`in_flight`: claimed by a replica now).
    public func deliveryCounts() throws(StoreError) -> [String: [String: Int]] {
        try counts("SELECT sink, state, count(*) FROM relay_delivery GROUP BY sink, state")
    }

    /// Per sink: the deliveries pending, in flight and dead.
    public func owedDeliveryCounts() throws(StoreError) -> [String: [String: Int]] {
        try counts(
            """
            SELECT sink, state, count(*) FROM relay_delivery
            WHERE state IN \(Delivery.State.sqlList(Delivery.State.owed)) GROUP BY sink, state
            """
        )
    }

    private func counts(_ sql: String) throws(StoreError) -> [String: [String: Int]] {
        try writing { db throws(PostgresError) -> [String: [String: Int]] in
            var counts: [String: [String: Int]] = [:]
            for row in try db.query(sql).rows {
                counts[row[0] ?? "", default: [:]][row[1] ?? ""] = Int(row[2] ?? "") ?? 0
            }
            return counts
        }
    }

    /// The newest deliveries, newest first (`sink`, `state`: only those).
    public func deliveries(
        sink: String? = nil, state: Delivery.State? = nil, limit: Int = 100
    ) throws(StoreError) -> [Delivery] {
        try writing { db throws(PostgresError) -> [Delivery] in
            try db.query(
                """
                SELECT \(Self.deliveryColumns()) FROM relay_delivery
                WHERE ($1::text IS NULL OR sink = $1) AND ($2::text IS NULL OR state = $2)
                ORDER BY created_at DESC, id DESC LIMIT $3
                """, [sink, state?.rawValue, String(limit)]
            ).rows.compactMap(Self.delivery)
        }
    }

    /// The newest transactions, newest first (`child`, `since`: only those).
    public func transactions(
        child: UUID? = nil, since: Date? = nil, limit: Int = 50
    ) throws(StoreError) -> [Transaction] {
        try writing { db throws(PostgresError) -> [Transaction] in
            try db.query(
                """
                SELECT id, child_id, amount_minor, type, description, balance_after_minor, extract(epoch FROM created_at), created_by
                FROM relay_txn WHERE ($1::text IS NULL OR child_id = $1) AND ($2::timestamptz IS NULL OR created_at >= $2::timestamptz)
                ORDER BY created_at DESC, id DESC LIMIT $3
                """, [child?.lowercased, since.map(ISODate.string), String(limit)]
            ).rows.compactMap { row -> Transaction? in
                guard let id = row[0].flatMap(UUID.init(uuidString:)),
                    let child = row[1].flatMap(UUID.init(uuidString:)),
                    let amount = row[2].flatMap({ Int64($0) }),
                    let type = row[3].flatMap(TransactionType.init(rawValue:)),
                    let after = row[5].flatMap({ Int64($0) }), let at = row[6].flatMap(Double.init)
                else { return nil }
                return Transaction(
                    id: id, childId: child, amount: Money.decimal(cents: amount), type: type, description: row[4] ?? "",
                    balanceAfter: Money.decimal(cents: after), createdAt: Date(timeIntervalSince1970: at),
                    createdByName: row[7] ?? "")
            }
        }
    }

    public func balanceTimes() throws(StoreError) -> [UUID: Date] {
        try writing { db throws(PostgresError) -> [UUID: Date] in
            var times: [UUID: Date] = [:]
            for row in try db.query(
                "SELECT id, extract(epoch FROM updated_at) FROM relay_child WHERE removed_at IS NULL"
            ).rows {
                if let id = row[0].flatMap(UUID.init(uuidString:)), let epoch = row[1].flatMap(Double.init) {
                    times[id] = Date(timeIntervalSince1970: epoch)
                }
            }
            return times
        }
    }

    /// The children, by first name, as the last catch-up listed them.
    public func children() throws(StoreError) -> [Child] {
        try writing { db throws(PostgresError) -> [Child] in
            try db.query(
                """
                SELECT id, name, balance_minor, last_name, weekly_allowance_minor FROM relay_child WHERE removed_at IS NULL
                ORDER BY name, id
                """
            ).rows.compactMap { row -> Child? in
                guard let id = row[0].flatMap(UUID.init(uuidString:)) else { return nil }
                return Child(
                    id: id, firstName: row[1] ?? "", lastName: row[3] ?? "",
                    weeklyAllowance: Money.decimal(cents: Int64(row[4] ?? "") ?? 0),
                    currentBalance: Money.decimal(cents: Int64(row[2] ?? "") ?? 0))
            }
        }
    }

    /// How many transactions and children are stored.
    public func counts() throws(StoreError) -> (children: Int, transactions: Int) {
        try writing { db throws(PostgresError) -> (Int, Int) in
            let row = try db.query(
                "SELECT (SELECT count(*) FROM relay_child WHERE removed_at IS NULL), (SELECT count(*) FROM relay_txn)"
            ).rows
                .first
            return (Int(row?[0] ?? "") ?? 0, Int(row?[1] ?? "") ?? 0)
        }
    }

    /// This replica is up: its row in `relay_replicas`.
    public func register(host: String) throws(StoreError) {
        try working { db throws(PostgresError) in try ReplicaRegistry(db).register(replica, host: host) }
    }

    /// This replica still lives, and holds the hub link or not.
    public func heartbeat(holdsLink: Bool) throws(StoreError) {
        try working { db throws(PostgresError) in try ReplicaRegistry(db).heartbeat(replica, holdsLink: holdsLink) }
    }

    /// The replicas sharing this database, the link holder first.
    public func replicas() throws(StoreError) -> [ReplicaRegistry.Replica] {
        try writing { db throws(PostgresError) -> [ReplicaRegistry.Replica] in try ReplicaRegistry(db).replicas() }
    }
}
