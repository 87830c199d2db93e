import AllowanceAPI
import Core
import Foundation
import SharedStore
import Store
import StoreContract

/// The commands on either store: with `store.url` they read and change the shared PostgreSQL database instead of the
/// local file.
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

    var relay: any RelayStorage {
        switch self {
        case .local(let store): store
        case .shared(let store): store
        }
    }

    /// The shared database, when it is the store.
    var shared: SharedRelayStore? {
        if case .shared(let store) = self { store } else { nil }
    }

    /// The SQLite file, when it is the store.
    var file: Store? {
        if case .local(let store) = self { store } else { nil }
    }

    func close() {
        if case .shared(let store) = self { store.close() }
    }
}

extension CacheOptions {
    /// The store a command reads and changes: the shared database with store.url, else the SQLite file (opened
    /// read-only for a command that only reads: the file stays as it was).
    func openRelayStore(readOnly: Bool = false) async throws -> OpenedStore {
        if let shared = try await openShared() { return .shared(shared) }
        return .local(try await openStore(readOnly: readOnly))
    }
}

extension ReplicaRegistry.Replica {
    var json: JSONValue {
        [
            "name": .string(name), "host": .string(host), "pid": .number(String(pid)), "alive": .bool(alive),
            "startedAt": .string(startedAt), "seenAt": .string(seenAt), "holdsLink": .bool(holdsLink),
            "linkHeldSince": holdsLink ? linkHeldSince.map { .string($0) } ?? .null : .null,
        ]
    }
}
