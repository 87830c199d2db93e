import AllowanceAPI
import Core
import Foundation
import SharedStore
import Store
import StoreContract

/// The commands that read the cache, on a shared PostgreSQL store (`store.url`): `status`, `transactions` and
/// `deliveries list` read it instead of the local file.
extension CacheOptions {
    /// The shared store when `store.url` is set (nil: the SQLite file is the store). Opening it brings its schema up
    /// to date as a replica's start does (each step once, under the migrations' lock).
    func openShared() async throws -> SharedRelayStore? {
        let local = try await settings()
        guard let location = local.sharedStore else { return nil }
        do {
            let password = try local.storePassword()
            return try SharedRelayStore.open(location, password: password, replica: "cli-\(getpid())")
        } catch let error as StoreError {
            throw CLIError(error.description, code: Exit.ioError)
        } catch let error as APIError {
            throw CLIError(error.message, code: Exit.config)
        }
    }
}

/// The relay's store for a command that works on either: the shared database when `store.url` is set, else the
/// SQLite file. Both implement the one contract (`RelayStore`).
enum OpenedStore {
    case local(Store)
    case shared(SharedRelayStore)

    var relay: any RelayStore {
        switch self {
        case .local(let store): store
        case .shared(let store): store
        }
    }

    func close() {
        if case .shared(let store) = self { store.close() }
    }
}

extension CacheOptions {
    func openRelayStore() async throws -> OpenedStore {
        if let shared = try await openShared() { return .shared(shared) }
        return .local(try await openStore())
    }
}

extension StatusCommand {
    /// `status` on a shared store: the replicas (who holds the hub link, since when), what is stored and owed.
    func sharedStatus(_ shared: SharedRelayStore) throws {
        defer { shared.close() }
        let replicas = try shared.replicas()
        let counts = try shared.counts()
        let deliveries = try shared.deliveryCounts()
        let holder = replicas.first { $0.holdsLink }
        if options.json {
            options.emit([
                "store": .string(shared.location.description),
                "children": .number(String(counts.children)), "transactions": .number(String(counts.transactions)),
                "linkHolder": holder.map { .string($0.name) } ?? .null,
                "replicas": .array(
                    replicas.map { r in
                        [
                            "name": .string(r.name), "host": .string(r.host), "pid": .number(String(r.pid)),
                            "alive": .bool(r.alive),
                            "startedAt": .string(r.startedAt), "seenAt": .string(r.seenAt),
                            "holdsLink": .bool(r.holdsLink),
                            "linkHeldSince": r.holdsLink ? r.linkHeldSince.map { .string($0) } ?? .null : .null,
                        ]
                    }),
                "deliveries": .object(
                    deliveries.keys.sorted().map { sink in
                        (
                            sink,
                            JSONValue.object(
                                deliveries[sink]!.keys.sorted().map { ($0, .number(String(deliveries[sink]![$0]!))) })
                        )
                    }),
            ])
            return
        }
        print("Store:         \(shared.location) (shared by replicas)")
        print("Cached:        \(counts.children) children, \(counts.transactions) transactions")
        print(
            "Hub link:      "
                + (holder.map { "held by \($0.name) since \($0.linkHeldSince ?? "?")" } ?? "held by no live replica"))
        print("Replicas:")
        let rows =
            [["NAME", "HOST", "PID", "STATE", "STARTED", "LAST SEEN"]]
            + replicas.map { r in
                [
                    r.name, r.host, String(r.pid), r.holdsLink ? "link holder" : r.alive ? "up" : "gone", r.startedAt,
                    r.seenAt,
                ]
            }
        print(Table.render(rows, rightAligned: [2]))
        if !deliveries.isEmpty {
            print("Deliveries:")
            let states = ["pending", "in_flight", "delivered", "dead", "merged", "muted"]
            let table =
                [["SINK"] + states.map { $0.uppercased() }]
                + deliveries.keys.sorted().map { sink in
                    [sink] + states.map { String(deliveries[sink]?[$0] ?? 0) }
                }
            print(Table.render(table, rightAligned: Set(1...states.count)))
        }
    }
}
