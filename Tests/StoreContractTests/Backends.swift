import Alerts
import AllowanceAPI
import Foundation
import PostgresTransport
import SharedStore
import Store
import StoreContract
import TestSupport
import Testing

/// The two stores of the one contract, each opened as a relay opens it: a SQLite file, and a database on a real
/// PostgreSQL server (its own `initdb`, one per test run). `handles` opens several at once on the same data, as two
/// processes on one file or two replicas on one database.
enum Backend: String, CaseIterable, CustomTestStringConvertible, Sendable {
    case sqlite, postgres

    var testDescription: String { rawValue }

    /// One server for the whole run; each test has a database of its own.
    private static let cluster = Task { try await PostgresCluster() }

    /// `count` handles on one new, empty store, each with `planner` installed.
    func handles(_ count: Int, planner: (any AlertPlanner)? = nil) async throws -> [any RelayStorage] {
        switch self {
        case .sqlite:
            let path = FileManager.default.temporaryDirectory.appending(path: "contract-\(UUID().uuidString).sqlite")
                .path
            return try (0..<count).map { _ in
                let store = try Store.open(path: path)
                store.setPlanner(planner, onPlanned: nil)
                return store
            }
        case .postgres:
            let cluster = try await Self.cluster.value
            let location = try PostgresLocation(cluster.url(database: try await cluster.createDatabase()))
            return try (0..<count).map { n in
                let store = try SharedRelayStore.open(location, password: cluster.password, replica: "replica-\(n)")
                store.setPlanner(planner, onPlanned: nil)
                return store
            }
        }
    }

    /// The family as a catch-up leaves it, through the contract's catch-up path.
    func seed(_ store: any SyncStore, children: [Child], transactions: [Transaction]) throws {
        try store.storeCaughtUp(
            children: children, transactions: transactions, rejected: [], cursors: [:], complete: true,
            balancesAskedAt: nil, history: false, historyTaken: nil, at: Date(), traceParent: nil)
    }

    func close(_ stores: [any RelayStorage]) {
        for case let shared as SharedRelayStore in stores { shared.close() }
    }
}

/// One delivery per event to the sink `hook`.
struct EveryEvent: AlertPlanner {
    func plan(_ event: RelayEvent) -> [PlannedDelivery] {
        [PlannedDelivery(sink: "hook", rule: "all", kind: event.kind, urgency: .normal)]
    }
}
