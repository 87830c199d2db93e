import Foundation
import SharedStore
import Store
import StoreContract

/// Where a daemon keeps everything, and what it shares: a SQLite file of its own (the embedded default), or a
/// PostgreSQL database shared with other relays (`store.url`). The daemon, its services and the sync engine are the
/// same on both; what differs is here.
public enum DaemonStore: Sendable {
    /// One relay per file: a second relay started on it waits as a standby until the first one ends.
    case file(Store)
    /// One of any number of replicas: the link's lease decides which one holds the hub link; every replica sends.
    /// `local`: this machine's file, for what is per machine by nature (its desktop popups).
    case shared(SharedRelayStore, local: Store, lease: LinkLease)

    /// The whole storage contract, on either backend.
    public var contract: any RelayStorage {
        switch self {
        case .file(let store): store
        case .shared(let shared, _, _): shared
        }
    }

    /// The shared database, for a replica (nil for a single relay).
    public var shared: SharedRelayStore? {
        if case .shared(let shared, _, _) = self { shared } else { nil }
    }

    /// The file, for a single relay (nil for a replica).
    public var file: Store? {
        if case .file(let store) = self { store } else { nil }
    }

    /// Whose lease gates what: the whole relay on a file (its ledger has no claims), the hub link on a shared store.
    var wholeRelayLease: (any WatchedLease)? {
        if case .file(let store) = self { FileLease(database: store.path) } else { nil }
    }

    var linkLease: (any WatchedLease)? {
        if case .shared(_, _, let lease) = self { lease } else { nil }
    }

    var popups: any PopupIds {
        switch self {
        case .file(let store): store
        case .shared(_, let local, _): local
        }
    }
}
