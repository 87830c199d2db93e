import AllowanceAPI
import Config
import Foundation
import HTTPTransport
import Logging
import Relay
import Store
import StoreContract

extension Daemon {
    /// The production start, for `run` and the in-process tests alike: opens the store (moving an unreadable one
    /// aside first when `rebuild` asks), prunes what is past its age, puts outbox writes that were in flight at the
    /// last stop back in line, and installs the relay's rules so that every stored event plans its alerts. Then
    /// the daemon, ready to `run`. A `StoreError` means the database cannot be used (`run` exits 74).
    public static func start(
        settings: RelaySettings, relayConfig: RelayConfig, rebuild: Bool = false, metrics: RelayMetrics, http: HTTPClient,
        reload: @escaping @Sendable () async throws(ConfigErrors) -> (RelaySettings, RelayConfig), logger: Logger
    ) throws(StoreError) -> Daemon {
        if rebuild, FileManager.default.fileExists(atPath: settings.storePath) {
            let aside = try Store.moveAside(path: settings.storePath)
            logger.notice("moved the old database aside to \(aside); rebuilding from the server")
        }
        let store = try Store.open(path: settings.storePath, durability: settings.storeDurability == "normal" ? .normal : .full)
        let pruned = try store.prune(transactionDays: settings.local.keepTransactionsDays)
        if pruned.inbox > 0 { logger.info("pruned \(pruned.inbox) inbox row(s) older than 7 days") }
        if pruned.transactions > 0 {
            logger.info("pruned \(pruned.transactions) transaction(s) older than \(settings.local.keepTransactionsDays ?? 0) days")
        }
        let requeued = try store.requeueInFlight()
        if requeued > 0 { logger.notice("\(requeued) outbox write(s) were in flight at the last stop: sending them again (idempotent)") }
        let engine = RelayEngine(store: store, popups: store, config: relayConfig, http: http, logger: logger)
        try engine.install()
        return Daemon(settings: settings, store: store, engine: engine, metrics: metrics, http: http, reload: reload, logger: logger)
    }
}
