import AllowanceAPI
import Config
import Foundation
import HTTPTransport
import Logging
import Relay
import SharedStore
import Store
import StoreContract

extension Daemon {
    /// The production start, for `run` and the in-process tests alike, on either store: opens it (the SQLite file,
    /// moving an unreadable one aside first when `rebuild` asks, or the shared database, migrating it). Then the
    /// daemon, ready to `run`, which prepares the store once it holds it (`prepare`). A `StoreError` means the store
    /// cannot be used (`run` exits 74).
    public static func start(
        settings: RelaySettings, relayConfig: AlertSettings, rebuild: Bool = false, metrics: RelayMetrics,
        http: HTTPClient,
        reload: @escaping @Sendable () async throws(ConfigErrors) -> (RelaySettings, AlertSettings), logger: Logger
    ) throws(StoreError) -> Daemon {
        let storage = try open(settings, rebuild: rebuild, logger: logger)
        let engine = RelayEngine(
            store: storage.contract, popups: storage.popups, config: relayConfig, http: http, logger: logger)
        return Daemon(
            settings: settings, storage: storage, engine: engine, metrics: metrics, http: http, reload: reload,
            logger: logger)
    }

    private static func open(_ settings: RelaySettings, rebuild: Bool, logger: Logger) throws(StoreError) -> DaemonStore
    {
        if rebuild, settings.local.sharedStore == nil, FileManager.default.fileExists(atPath: settings.storePath) {
            // Never from under a running relay: the file is moved aside only while no other relay holds it.
            let lease = FileLease(database: settings.storePath)
            defer { lease.release() }
            guard (try? lease.tryAcquire()) == true else {
                throw StoreError(
                    path: settings.storePath, "Another relay runs on this database: stop it before run --rebuild.",
                    code: .locked)
            }
            let aside = try Store.moveAside(path: settings.storePath)
            logger.notice("moved the old database aside to \(aside); rebuilding from the server")
        }
        let file = try Store.open(
            path: settings.storePath, durability: settings.storeDurability == .normal ? .normal : .full)
        guard let location = settings.local.sharedStore else { return .file(file) }
        if rebuild {
            throw StoreError(
                path: location.description,
                "--rebuild starts a SQLite file over; the shared database is every replica's. Start it over with a new database in store.url.",
                code: .refused)
        }
        let password: String?
        do { password = try settings.local.storePassword() } catch {
            throw StoreError(path: location.description, error.message, code: .refused)
        }
        let name = settings.local.replicaName ?? "\(ProcessInfo.processInfo.hostName)-\(getpid())"
        let shared = try SharedRelayStore.open(location, password: password, replica: name)
        // One lease per hub: relays of different families may share one database.
        let lease = LinkLease(settings.hubURL.absoluteString, location: location, password: password)
        return .shared(shared, local: file, lease: lease)
    }

    /// Once the store is this relay's (a file's lease held; a shared database is every replica's from the start):
    /// the file pruned, outbox writes that were in flight at its last stop back in line, and the relay's rules
    /// installed so that every stored event plans its alerts.
    func prepare() throws(StoreError) {
        if let file = storage.file {
            let pruned = try file.prune(transactionDays: settings.local.keepTransactionsDays)
            if pruned.inbox > 0 { logger.info("pruned \(pruned.inbox) inbox row(s) older than 7 days") }
            if pruned.transactions > 0 {
                logger.info(
                    "pruned \(pruned.transactions) transaction(s) older than \(settings.local.keepTransactionsDays ?? 0) days"
                )
            }
            let requeued = try file.requeueInFlight()
            if requeued > 0 {
                logger.notice(
                    "\(requeued) outbox write(s) were in flight at the last stop: sending them again (idempotent)")
            }
        }
        try engine.install()
    }
}
