import AllowanceAPI
import Config
import Core
import Foundation
import HTTPTransport
import Logging
import PostgresTransport
import Relay
import SharedStore
import SignalRClient
import Store
import StoreContract
import Sync
import Synchronization
import UnixSignals

/// `run` with `store.url`: one of any number of relays sharing a PostgreSQL database and a server.
///
/// - The hub link and its catch-ups run only on the replica holding the link's lease (`holdingLease`); when its
///   holder dies the server drops its session and the lock, another replica takes it at its next try (every
///   second) and catches up from the cursors the last holder left, so nothing the hub sent meanwhile is lost.
/// - Every replica runs the sink workers on the shared ledger: a read of due deliveries claims them, a commit that
///   planned some notifies every replica (`LISTEN`), and each replica renews its claims every second so that only
///   a dead one's are taken over (after `SharedRelayStore.claimFor`, with the same ids).
/// - A heartbeat row per replica (`relay_replicas`) is what `status` lists.
///
/// The local SQLite file stays, as this machine's memory for what is per machine by nature: its desktop popups.
public struct ReplicaDaemon: Sendable {
    let settings: RelaySettings
    public let shared: SharedRelayStore
    let local: Store
    let engine: RelayEngine
    let metrics: RelayMetrics
    let lease: LinkLease
    let password: String?
    let http: HTTPClient
    let reload: @Sendable () async throws(ConfigErrors) -> (RelaySettings, RelayConfig)
    let logger: Logger
    private let stopping = StopFlag()
    private let stopSignal = Wakeup()
    /// Rung by a notification that a write was queued or settled, for the outbox's drain.
    private let outboxWake = Wakeup()

    /// Connects to the shared database (migrating it), opens the local file, installs the rules.
    public static func start(
        settings: RelaySettings, relayConfig: RelayConfig, metrics: RelayMetrics, http: HTTPClient,
        reload: @escaping @Sendable () async throws(ConfigErrors) -> (RelaySettings, RelayConfig), logger: Logger
    ) throws(StoreError) -> ReplicaDaemon {
        guard let location = settings.local.sharedStore else {
            throw StoreError(path: settings.storePath, "store.url is not set")
        }
        let password: String?
        do { password = try settings.local.storePassword() } catch {
            throw StoreError(path: location.description, error.message, code: .refused)
        }
        let name = settings.local.replicaName ?? "\(ProcessInfo.processInfo.hostName)-\(getpid())"
        let shared = try SharedRelayStore.open(location, password: password, replica: name)
        let local = try Store.open(
            path: settings.storePath, durability: settings.storeDurability == "normal" ? .normal : .full)
        // Everything the relay keeps is shared but this machine's popups.
        let engine = RelayEngine(store: shared, popups: local, config: relayConfig, http: http, logger: logger)
        try engine.install()
        // One lease per hub: relays of different families may share one database.
        let lease = LinkLease(settings.hubURL.absoluteString, location: location, password: password)
        return ReplicaDaemon(
            settings: settings, shared: shared, local: local, engine: engine, metrics: metrics, lease: lease,
            password: password,
            http: http, reload: reload,
            logger: logger)
    }

    /// Runs until SIGTERM/SIGINT or `stop()`; returns the exit code.
    public func run(signals: DaemonSignals? = nil) async -> Int32 {
        let (shared, engine, logger) = (shared, engine, logger)
        do {
            try shared.register(host: ProcessInfo.processInfo.hostName)
        } catch {
            logger.critical("\(error)")
            return 74
        }
        logger.info(
            "replica \(shared.replica) starting",
            metadata: ["store": "\(shared.location)", "hub": "\(settings.hubURL.redactedForLogs)"])
        if settings.otlpEndpoint != nil {
            logger.warning("with store.url, telemetry is not run yet (docs/scaling.md)")
        }
        let link = LinkMonitor(store: shared, logger: logger)
        link.set(.standby, detail: "waiting for the hub link")
        let endpoint: StatusServer?
        do {
            endpoint = try statusEndpoint(link: link)
        } catch {
            logger.critical("\(error.message)")
            return 1
        }
        Systemd.ready(status: "replica \(shared.replica): waiting for the hub link or deliveries")
        let holdsLink = LinkHeld()
        let signalWatch = Task {
            guard let signals else { return }
            for await signal in signals.stop {
                logger.notice("received \(signal), stopping gracefully")
                await stop()
            }
        }
        // SIGHUP: rules, templates and sinks read again, as for a single relay (each replica its own file).
        let reloads = Task { [settings, reload] in
            guard let signals else { return }
            await Reloader(current: settings, engine: engine, reload: reload, logger: logger).run(on: signals.reload)
        }
        defer {
            signalWatch.cancel()
            reloads.cancel()
            endpoint?.stop()
        }
        let workers = Task { await engine.run() }
        let hubLink = Task {
            await holdingLease(lease) { held in
                holdsLink.value.store(held, ordering: .relaxed)
                link.set(
                    held ? .connecting : .standby,
                    detail: held ? "holds the hub link, connecting" : "another replica holds the hub link")
                logger.notice(
                    held
                        ? "replica \(shared.replica) holds the hub link"
                        : "replica \(shared.replica) no longer holds the hub link")
                try? shared.heartbeat(holdsLink: held)
            } work: {
                await ReplicaLink(
                    settings: settings, shared: shared, engine: engine, link: link, http: http, logger: logger
                ).run()
            }
        }
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await heartbeat(holdsLink: holdsLink) }
            group.addTask { await listen() }
            group.addTask { await drainOutbox() }
            await stopSignal.wait(upTo: .seconds(365 * 86400))
            // The link first (no new events, the lease free for another replica), then the workers finish the sends
            // they are in (up to the grace period) while the heartbeat still renews their claims.
            hubLink.cancel()
            await hubLink.value
            engine.stop()
            let deadline = Task {
                try? await Task.sleep(for: Daemon.gracePeriod)
                workers.cancel()
            }
            await workers.value
            deadline.cancel()
            outboxWake.signal()
            group.cancelAll()
        }
        do {
            let released = try shared.releaseClaims()
            if released > 0 { logger.notice("gave back \(released) claimed delivery(ies) to the other replicas") }
            try shared.heartbeat(holdsLink: false)
        } catch {
            logger.warning("could not give back this replica's claims (they expire by themselves): \(error)")
        }
        link.set(.stopped, detail: "stopped")
        shared.close()
        logger.notice("stopped", metadata: ["exitCode": "0"])
        return 0
    }

    /// A graceful stop: the link is let go, the sends under way finish, the claims left are given back.
    public func stop() async {
        stopping.set()
        stopSignal.signal()
    }

    /// `status.listen`: /healthz and /metrics as a single relay serves them, on the shared store; this replica's link
    /// state (a replica in standby is healthy). Nil when not configured.
    private func statusEndpoint(link: LinkMonitor) throws(DaemonError) -> StatusServer? {
        guard let listen = settings.statusListen else { return nil }
        let handle = StatusEndpoint(
            host: listen.host, port: listen.port, store: shared, link: link, metrics: metrics, logger: logger
        ).handle
        let server: StatusServer
        do {
            server = try StatusServer(host: listen.host, port: listen.port)
        } catch {
            throw DaemonError(
                exitCode: 1,
                message: "status.listen \(listen.host):\(listen.port): cannot serve /healthz and /metrics: \(error)")
        }
        logger.info("status endpoint on http://\(listen.host):\(listen.port) (/healthz, /metrics)")
        Task { await server.serve(handle) }
        return server
    }

    /// Every second: this replica lives (its row, its claims renewed).
    private func heartbeat(holdsLink: LinkHeld) async {
        var failing = false
        while !Task.isCancelled {
            do {
                try shared.heartbeat(holdsLink: holdsLink.value.load(ordering: .relaxed))
                try shared.renewClaims()
                if failing { logger.notice("the shared database answers again") }
                failing = false
            } catch {
                if !failing { logger.error("heartbeat: \(error)") }
                failing = true
            }
            try? await Task.sleep(for: .seconds(1))
        }
    }

    /// Sends the shared outbox's writes, as any replica may: at each notification, when a retry falls due, and at
    /// least every minute.
    private func drainOutbox() async {
        let api = settings.apiClient(tokens: settings.tokenSource(http: http), http: http)
        let limits = SyncCoordinator.OutboxLimits(
            maxAttempts: settings.local.outboxMaxAttempts, maxAge: Double(settings.local.outboxMaxAgeDays) * 86400)
        let drain = OutboxDrain(outbox: shared, api: api, limits: limits, logger: logger)
        while !Task.isCancelled, !stopping.isSet {
            if case .waiting(let at, let error) = await drain.run().end {
                logger.warning("outbox: a write waits for a retry at \(ISODate.string(at)): \(error)")
            }
            let next = (try? shared.nextOutboxAttempt(after: Date())).flatMap { $0 }
            await outboxWake.wait(upTo: .seconds(min(60, max(0.05, next?.timeIntervalSinceNow ?? 60))))
        }
    }

    /// Wakes the workers at each notification that deliveries were planned or given back, on a session of its own
    /// (one that waits for notifications does nothing else). Reconnects after a lost database.
    private func listen() async {
        let (location, password, engine, logger, stopping, outboxWake) = (
            shared.location, password, engine, logger, stopping, outboxWake
        )
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            Thread {
                ThreadName.set("pg-listen")
                var failing = false
                while !stopping.isSet {
                    do throws(PostgresError) {
                        let db = try PostgresConnection(
                            location, password: password, applicationName: "allowance-relay listener")
                        defer { db.close() }
                        try db.listen(SharedRelayStore.channel)
                        try db.listen(SharedRelayStore.outboxChannel)
                        try db.listen(SharedRelayStore.mutesChannel)
                        // What was planned or queued before LISTEN took effect is looked at once.
                        engine.wakeWorkers()
                        outboxWake.signal()
                        if failing { logger.notice("listening for deliveries again") }
                        failing = false
                        while !stopping.isSet {
                            let channels = Set(try db.notifications(timeout: .milliseconds(500)).map(\.channel))
                            if channels.contains(SharedRelayStore.channel) { engine.wakeWorkers() }
                            if channels.contains(SharedRelayStore.outboxChannel) { outboxWake.signal() }
                            if channels.contains(SharedRelayStore.mutesChannel) { engine.mutesChanged() }
                        }
                    } catch {
                        if !failing { logger.error("cannot listen for deliveries (polling meanwhile): \(error)") }
                        failing = true
                        engine.wakeWorkers()
                        Thread.sleep(forTimeInterval: 1)
                    }
                }
                done.resume()
            }.start()
        }
    }
}

/// The hub link while this replica holds the lease: the connection, its events into the shared store, a catch-up
/// at each (re)connect and whenever an event shows a gap. Ends when cancelled (the lease lost, or the stop).
struct ReplicaLink: Sendable {
    let settings: RelaySettings
    let shared: SharedRelayStore
    let engine: RelayEngine
    let link: LinkMonitor
    let http: HTTPClient
    let logger: Logger

    func run() async {
        let tokens = settings.tokenSource(http: http)
        let api = settings.apiClient(tokens: tokens, http: http)
        let connection = HubConnection(
            url: settings.hubURL, options: Daemon.hubOptions(settings, http: http, tokens: tokens),
            logger: Logger(label: "signalr"))
        let received = HubEventBuffer<HubEvent>(capacity: 4_000)
        await connection.on(
            HubEvent.decoder { [logger] problem in logger.error("could not read a hub event: \(problem)") },
            into: received)
        let events = await connection.events()
        let catchUp = CatchUpRequests()
        let (shared, engine, link, logger) = (shared, engine, link, logger)
        await withTaskCancellationHandler {
            await withTaskGroup(of: Void.self) { group in
                group.addTask {
                    while let batch = await received.next() {
                        do {
                            let results = try shared.apply(batch)
                            for (event, result) in zip(batch, results) {
                                switch result {
                                case .stored(gap: nil), .duplicate: logger.info("\(event.summary)")
                                case .stored(gap: .some), .needsCatchUp: catchUp.request()
                                case .rejected(let reason, _): logger.warning("set aside, not stored: \(reason)")
                                }
                            }
                        } catch {
                            logger.error("could not store \(batch.count) event(s): \(error)")
                            catchUp.request()
                        }
                    }
                }
                group.addTask {
                    await catchUp.serve { await ReplicaCatchUp(api: api, shared: shared, logger: logger).run() }
                }
                group.addTask {
                    do throws(HubConnectionError) {
                        try await connection.start()
                    } catch {
                        logger.error("could not connect to the hub: \(error.message)")
                        // Holding the lease a while: another replica would meet the same server.
                        try? await Task.sleep(for: .seconds(5))
                        return
                    }
                    for await event in events {
                        switch event {
                        case .connected(let id), .reconnected(let id):
                            logger.info("connected to the hub")
                            link.set(
                                .connected, connectionId: id, transport: await connection.transport?.rawValue,
                                hubProtocol: connection.hubProtocol.rawValue, detail: "connected")
                            engine.linkRestored()
                            catchUp.request()
                        case .reconnecting(let reason):
                            link.set(.reconnecting, detail: reason)
                            engine.linkLost(reason)
                        case .closed(let error):
                            if let error {
                                logger.error("the hub connection ended: \(error.message)")
                                try? await Task.sleep(for: .seconds(5))
                            }
                            return
                        }
                    }
                }
                // The connection's end (or the lease's) ends the link; the lease loop tries again.
                await group.next()
                received.finish()
                await connection.stop()
                catchUp.finish()
                group.cancelAll()
            }
        } onCancel: {
            received.finish()
            catchUp.finish()
            Task { await connection.stop() }
        }
    }
}

/// Whether this replica holds the hub link, for its heartbeat.
final class LinkHeld: Sendable {
    let value = Atomic<Bool>(false)
}

/// Catch-ups asked for while one runs become one more after it, not one each.
final class CatchUpRequests: Sendable {
    private let state = Mutex<(asked: Bool, finished: Bool)>((false, false))
    private let wakeup = Wakeup()

    func request() {
        state.withLock { $0.asked = true }
        wakeup.signal()
    }

    func finish() {
        state.withLock { $0.finished = true }
        wakeup.signal()
    }

    /// Runs `body` for each request; one that failed (false) is tried again after 2, 4, 8 ... s, at most a minute.
    func serve(_ body: @Sendable () async -> Bool) async {
        var failures = 0
        while true {
            let (asked, finished) = state.withLock { s in
                defer { s.asked = false }
                return (s.asked, s.finished)
            }
            if finished || Task.isCancelled { return }
            guard asked else {
                await wakeup.wait(upTo: .seconds(3600))
                continue
            }
            if await body() {
                failures = 0
            } else {
                failures += 1
                await wakeup.wait(upTo: .seconds(Self.retry.seconds(retry: failures, serverAsked: nil)))
                state.withLock { $0.asked = true }
            }
        }
    }

    static let retry = Backoff(initial: .seconds(2), maximum: .seconds(60))
}

/// What the link holder fetches after a (re)connect or a takeover: each child's transactions, newest first, down to
/// its cursor (the newest transaction of the last completed catch-up, kept in the shared database so that the next
/// holder starts there). Not down to any stored transaction: a live event may be stored while an older one was
/// missed. A new database takes the family's history without alerting it.
struct ReplicaCatchUp: Sendable {
    let api: APIClient
    let shared: SharedRelayStore
    let logger: Logger
    static let pageSize = 100
    static let maxPages = 2_000

    /// False when it failed (it is tried again).
    func run() async -> Bool {
        do {
            let children = try await api.children()
            try shared.saveChildren(children)
            let history = try shared.syncValue("history_taken") == nil
            var stored = 0
            for child in children { stored += try await catchUp(child.id, history: history) }
            if history { try shared.setSyncValue("history_taken", ISODate.string(Date())) }
            try shared.setSyncValue("last_catch_up", ISODate.string(Date()))
            try shared.setSyncStatus(SyncStatus(phase: .idle, detail: "caught up"))
            logger.info(
                history
                    ? "took the family's history: \(stored) transaction(s), not alerted"
                    : "caught up: \(stored) missed transaction(s)")
            return true
        } catch {
            logger.error("catch-up failed (tried again shortly): \(error)")
            try? shared.setSyncStatus(SyncStatus(phase: .offline, detail: "catch-up failed: \(error)"))
            return false
        }
    }

    private func catchUp(_ child: UUID, history: Bool) async throws -> Int {
        let key = "cursor:\(child.lowercased)"
        let cursor = try shared.syncValue(key)
        var missed: [Transaction] = []
        var newest: String?
        var stored = 0
        var offset = 0
        for _ in 0..<Self.maxPages {
            let page = try await api.transactions(child: child, limit: Self.pageSize, offset: offset)
            if page.isEmpty { break }
            newest = newest ?? page.first?.id.lowercased
            let reached = page.firstIndex { $0.id.lowercased == cursor }
            let fresh = Array(page[..<(reached ?? page.endIndex)])
            if history || cursor == nil {
                // Stored page by page (a long history stays out of memory); alerting only a child new to a known family.
                stored += try shared.storeCaughtUp(fresh.reversed(), alerting: !history)
            } else {
                missed += fresh
            }
            if reached != nil { break }
            offset += page.count
        }
        // Oldest first, one commit: their alerts go in the order they happened.
        stored += try shared.storeCaughtUp(missed.reversed(), alerting: true)
        if let newest { try shared.setSyncValue(key, newest) }
        return stored
    }
}
