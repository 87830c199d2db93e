import AllowanceAPI
import Config
import Core
import Foundation
import HTTPTransport
import Logging
import Relay
import ServiceLifecycle
import SignalRClient
import Store
import StoreContract
import Sync
import Synchronization
import UnixSignals

/// `run` as a ServiceGroup, on either store. Services start in this order and stop in the reverse one on
/// SIGTERM/SIGINT:
///   trace exporter (with tracing on), status endpoint, replica presence (on a shared store), relay workers, outbox
///   poller, watchdog, reloader, hub link (with its writer)
/// so the hub link closes first (no new events) and what it received is stored, then the outbox poller, then the
/// workers finish the send each is in (a replica's claims renewed meanwhile), the status endpoint answers until the
/// end, and the last spans go. Past `gracePeriod` whatever is left is cancelled; deliveries cut short are put back to
/// pending. Then a file is checkpointed; a replica gives back what it still claims.
///
/// On a SQLite file the whole relay holds the file's lease: a second relay started on the same file waits as a
/// standby until the first one ends. On a shared database only the hub link is leased: every replica sends.
public struct Daemon: Sendable {
    let settings: RelaySettings
    /// Where it keeps everything (read a file freely: SQLite's WAL lets readers beside the writer).
    public let storage: DaemonStore
    let engine: RelayEngine
    let metrics: RelayMetrics
    let reload: @Sendable () async throws(ConfigErrors) -> (RelaySettings, AlertSettings)
    /// The process's one HTTP client: negotiate, REST and the sinks share its connections.
    let http: HTTPClient
    let logger: Logger

    public static let gracePeriod: Duration = .seconds(10)
    private let control = Control()

    /// The running group, for `stop()`; a stop asked before the group exists is kept until it does.
    private final class Control: Sendable {
        let state = Mutex<(group: ServiceGroup?, stopAsked: Bool)>((nil, false))
        /// Signalled by the stop, for a wait asleep in `poll` (the standby's).
        let stopped = PollWake()
        var stopAsked: Bool { state.withLock { $0.stopAsked } }
    }

    /// Once the first catch-up is done and its alerts had a moment to go, the code only the start ran is let go of
    /// (`CodePages`): an idle relay's resident memory is then what idling uses (BENCHMARKS.md, session 41).
    private final class Settling: Sendable {
        private let done = Atomic<Bool>(false)
        private let logger: Logger
        init(logger: Logger) { self.logger = logger }

        func caughtUp() {
            guard !done.exchange(true, ordering: .relaxed) else { return }
            Task.detached(priority: .background) { [logger] in
                try? await Task.sleep(for: .seconds(10))
                let kib = CodePages.release()
                logger.debug("settled: unmapped \(kib / 1024) MiB of code pages the start had touched")
            }
        }
    }

    /// The parts already made; `start` makes them as `run` does.
    init(
        settings: RelaySettings, storage: DaemonStore, engine: RelayEngine, metrics: RelayMetrics, http: HTTPClient,
        reload: @escaping @Sendable () async throws(ConfigErrors) -> (RelaySettings, AlertSettings), logger: Logger
    ) {
        self.settings = settings
        self.storage = storage
        self.engine = engine
        self.metrics = metrics
        self.http = http
        self.reload = reload
        self.logger = logger
    }

    /// Runs until SIGTERM or SIGINT (a graceful stop), or until the hub connection ends for good; returns the
    /// exit code (`run --help` lists them). `signals`: the ones the executable trapped (`DaemonSignals.trap()`);
    /// nil in-process, where `stop()` and `reload()` do what SIGTERM and SIGHUP would.
    public func run(signals: DaemonSignals? = nil) async -> Int32 {
        // Our own signal handling rather than the group's, to say which signal arrived.
        let stopping = Task {
            guard let signals else { return }
            var stopping = false
            for await signal in signals.stop {
                logger.notice(
                    stopping ? "received \(signal) again: already stopping" : "received \(signal), stopping gracefully")
                if !stopping { await stop() }
                stopping = true
            }
        }
        defer { stopping.cancel() }
        guard let lease = storage.wholeRelayLease else { return await runGroup(signals: signals) }
        switch await standBy(until: lease) {
        case .held:
            defer { lease.release() }
            return await runGroup(signals: signals)
        case .stopped:
            logger.notice("stopped", metadata: ["exitCode": "0"])
            return 0
        case .failed(let error):
            logger.critical("\(error)")
            return 74
        }
    }

    private enum StandBy {
        case held, stopped
        case failed(any Error)
    }

    /// Waits for the file's lease, as a standby while another relay holds it: asleep on a thread of its own until
    /// that relay ends or this one is stopped (`FileLease.acquire`), with no timer.
    private func standBy(until lease: any WatchedLease) async -> StandBy {
        do {
            if control.stopAsked { return .stopped }
            if try lease.tryAcquire() { return .held }
            logger.notice(
                "another relay runs on \(storage.file?.path ?? "this database"): waiting as a standby until it ends")
            Systemd.ready(status: "standby: another relay runs on this database")
            let wake = control.stopped
            guard try await offThread(named: "standby", { try lease.acquire(until: wake) }), !control.stopAsked else {
                lease.release()
                return .stopped
            }
        } catch {
            return .failed(error)
        }
        logger.notice("the other relay has ended: taking over")
        return .held
    }

    private func runGroup(signals: DaemonSignals?) async -> Int32 {
        do {
            try prepare()
        } catch {
            logger.critical("\(error)")
            return 74
        }
        let store = storage.contract
        let exporter = TracingSetup.exporter(settings, http: http, logger: logger)
        let tokens = settings.tokenSource(http: http)  // one source for the hub and REST: one login, one renewal
        let link = LinkMonitor(store: store, logger: logger)
        // The sync engine's catch-ups and outbox drains block on the store: a thread of their own, not the pool.
        let syncThread = ThreadExecutor(name: "sync")
        defer { syncThread.shutdown() }
        let sync = SyncCoordinator(
            store: store, api: settings.apiClient(tokens: tokens, http: http),
            limits: .init(
                maxAttempts: settings.local.outboxMaxAttempts, maxAge: Double(settings.local.outboxMaxAgeDays) * 86400),
            tracing: settings.otlpEndpoint != nil, executor: syncThread, logger: logger)
        let settling = Settling(logger: logger)
        await sync.onCaughtUp { [engine] in
            engine.familyChanged()
            settling.caughtUp()
        }
        sync.wishLists.onStored { [engine] in engine.familyChanged() }
        let holdsLink = LinkHeld(changed: storage.shared?.heartbeatDue)
        var presence: ReplicaPresence?
        if let shared = storage.shared {
            let replica = ReplicaPresence(
                shared: shared, engine: engine, sync: sync, syncThread: syncThread, holdsLink: holdsLink, logger: logger
            )
            let named: Bool
            do {
                named = try await replica.ownName(stopAsked: { control.stopAsked })
            } catch {
                logger.critical("\(error.message)")
                shared.close()
                return error.exitCode
            }
            // Stopped while waiting for the name: nothing was started, and nothing may start without it.
            guard named else {
                shared.close()
                logger.notice("stopped", metadata: ["exitCode": "0"])
                return 0
            }
            presence = replica
        }

        // The workers' thread is the HTTP client's: a send they hand over starts there once their jobs have run, and
        // its answer comes back as a job there, with no other thread woken either way (BENCHMARKS.md, session 48).
        // It is the process's for good, not the group's.
        let relayThread = http.thread
        // On a file the writer shares the workers' thread (a commit reaches them as a job there). On a shared
        // database each of its calls waits for a round trip on a session of its own: a thread of its own too, so that
        // storing a burst and claiming and settling deliveries overlap instead of queueing behind each other.
        let writerThread = storage.file == nil ? ThreadExecutor(name: "writer") : relayThread
        defer { if writerThread !== relayThread { writerThread.shutdown() } }
        var services: [ServiceGroupConfiguration.ServiceConfiguration] = []
        func add(_ service: some Service, _ name: String) {
            services.append(
                .init(
                    service: service, successTerminationBehavior: .gracefullyShutdownGroup,
                    failureTerminationBehavior: .gracefullyShutdownGroup, serviceName: name))
        }
        // First, so that it stops last: the spans of the others' last moments are sent.
        if let exporter { add(exporter, "trace exporter") }
        if let file = storage.file {
            // SQLite folds the log into the file as it grows but never shrinks it: emptied every 10 minutes (and at
            // the stop), it stays small on disk. A checkpoint that meets a long read is skipped until the next time.
            add(
                untilShutdown { [logger] in
                    while !Task.isCancelled {
                        try? await Task.sleep(for: .seconds(600))
                        guard !Task.isCancelled else { return }
                        do { try file.checkpoint() } catch {
                            logger.debug("write-ahead log checkpoint skipped: \(error)")
                        }
                    }
                }, "log checkpoint")
        }
        if let listen = settings.statusListen {
            let token: Secret?
            do { token = try settings.readStatusToken() } catch {
                logger.critical("status.token_file: \(error)")
                return 78
            }
            add(
                StatusEndpoint(
                    host: listen.host, port: listen.port, store: store, token: token,
                    alerts: { [engine] in engine.config },
                    link: link, metrics: metrics, unhealthyAfter: settings.unhealthyAfter, logger: logger
                ).service, "status endpoint")
        }
        if let presence { add(presence, "replica presence") }
        // The workers' thread (and on a file, the writer's): the writer's commit reaches the workers, and a worker's
        // send its outcome, as jobs queued on that thread rather than wake-ups of pool threads. It is not the
        // connection's thread: a burst is decoded there while the last one commits here.
        add(RelayService(engine: engine, executor: relayThread), "relay")
        let reloader = Reloader(current: settings, engine: engine, reload: reload, logger: logger)
        // Writes queued by another process signal (SIGUSR1, below; on a shared store, a notification); the poll is
        // the clock for retries that fall due, and the fallback for a signal that could not be sent. Each look wakes
        // three threads of the idle relay (the alarm clock's, the sync's, the writer's): once in 5 minutes, not once a
        // minute (BENCHMARKS.md, session 42).
        add(
            untilShutdown {
                await withTaskExecutorPreference(syncThread) { await sync.pollOutbox(every: .seconds(300)) }
            },
            "outbox")
        add(
            untilShutdown { await withTaskExecutorPreference(syncThread) { await sync.wishLists.run() } },
            "wish lists")
        add(
            untilShutdown {
                await Systemd.watchdog()
                await untilCancelled()
            }, "watchdog")
        if let signals {
            add(untilShutdown { await reloader.run(on: signals.reload) }, "reloader")
            // SIGUSR1: another process changed the database (`mute`, `transaction add`, `outbox retry`).
            add(
                untilShutdown { [engine] in
                    for await _ in signals.databaseChanged {
                        await withTaskExecutorPreference(syncThread) {
                            await Self.databaseChanged(engine: engine, sync: sync)
                        }
                    }
                }, "changes from the CLI")
        }
        add(
            LinkService(
                settings: settings, sync: sync, store: store, engine: engine, link: link, metrics: metrics, http: http,
                tokens: tokens, executor: writerThread, syncThread: syncThread, lease: storage.linkLease,
                holdsLink: holdsLink, logger: logger),
            "hub")

        var config = ServiceGroupConfiguration(services: services, logger: logger)
        config.maximumGracefulShutdownDuration = Self.gracePeriod
        // No maximumCancellationDuration: past it ServiceGroup stops the process with a fatal error; every service
        // here ends promptly on cancellation (HTTP sends are cancelled, sd-bus calls have their own timeout).
        config.maximumCancellationDuration = nil
        let group = ServiceGroup(configuration: config)
        let stopAsked = control.state.withLock { state in
            state.group = group
            return state.stopAsked
        }
        if stopAsked { Task { await group.triggerGracefulShutdown() } }

        logger.info("starting", metadata: ["hub": "\(settings.hubURL.redactedForLogs)"])
        if settings.insecureTLS {
            logger.warning(
                "server.insecure_tls is on: the REST API's TLS certificate is not checked either (tests only; server.ca_file takes a private CA)"
            )
        }
        if let file = storage.file { Self.checkIntegrityInBackground(file, logger: logger) }
        link.set(presence == nil ? .connecting : .standby, detail: "starting")
        // Ready once the store is open and the workers run: the hub may be away for long, and the relay is doing
        // its job meanwhile (outbox, deliveries, reconnecting).
        Systemd.ready(status: "connecting to \(settings.hubURL.host() ?? "the hub")")
        var code: Int32 = 0
        do {
            try await group.run()
        } catch let exit as DaemonError {
            logger.critical("\(exit.message)")
            code = exit.exitCode
        } catch {
            logger.critical("\(error)")
            code = 1
        }
        link.set(.stopped, detail: code == 0 ? "stopped" : "ended with exit code \(code)")
        presence?.leave()
        if let file = storage.file {
            do {
                try file.settleBalances()
                try file.checkpoint()
            } catch {
                logger.warning(
                    "could not fold the balances and the log into the database at stop (harmless: the rows say where each balance is, and SQLite checkpoints at the next open): \(error)"
                )
            }
        }
        logger.notice("stopped", metadata: ["exitCode": "\(code)"])
        return code
    }

    /// SQLite's check of every page, once the daemon runs: on a thread of its own, since it takes as long as the file
    /// is large (0.3 s at a million transactions), and neither the start nor the cooperative pool should wait for it.
    /// A file that is not a database at all was refused at open already.
    private static func checkIntegrityInBackground(_ store: Store, logger: Logger) {
        let thread = Thread {
            ThreadName.set("integrity-check")
            do {
                if let problem = try store.integrityProblem() { logger.critical("\(problem)") }
            } catch {
                logger.error("could not check the database's integrity: \(error)")
            }
        }
        thread.start()
    }

    /// What SIGUSR1 does: the mutes read again, the sinks look at their ledger (`deliveries retry`) and the outbox
    /// drained now, not at the next poll.
    private static func databaseChanged(engine: RelayEngine, sync: SyncCoordinator) async {
        engine.mutesChanged()
        engine.retryAsked()
        await sync.drainOutbox()
    }

    /// What SIGHUP does: the configuration read again, rules, templates and sinks applied without touching the hub
    /// connection. False when it was refused (the running configuration stays).
    @discardableResult
    public func reload() async -> Bool {
        await Reloader(current: settings, engine: engine, reload: reload, logger: logger).reloadOnce()
    }

    /// A graceful stop, as SIGTERM gives: the hub link closes, the events received are stored, the sends under way
    /// finish; `run` then returns 0.
    public func stop() async {
        let group = control.state.withLock { state in
            state.stopAsked = true
            return state.group
        }
        control.stopped.signal()
        await group?.triggerGracefulShutdown()
    }

    /// The hub connection's options, from the settings.
    public static func hubOptions(
        _ settings: RelaySettings, http: HTTPClient, tokens: (any TokenSource)?
    ) -> HubConnectionOptions {
        var options = HubConnectionOptions()
        if let tokens {
            options.accessTokenProvider = { try await tokens.token() }
            options.accessTokenRefused = { await tokens.refused() }
        }
        options.accessTokenInQuery = settings.accessTokenInQuery
        options.skipNegotiation = settings.skipNegotiation
        options.keepAliveInterval = .seconds(settings.keepAliveInterval)
        options.serverTimeout = .seconds(settings.serverTimeout)
        options.hubProtocol = settings.hubProtocol
        options.transports = settings.transports
        options.userAgent = http.userAgent
        options.httpClient = http
        options.reconnectPolicy = ExponentialRetryPolicy()
        options.startRetryPolicy = ExponentialRetryPolicy()
        options.webSocket.caFile = settings.caFile
        options.webSocket.allowInsecureTLS = settings.insecureTLS
        return options
    }
}

/// The relay's workers, stopped gracefully: the send in flight finishes, no other starts.
struct RelayService: Service {
    let engine: RelayEngine
    /// Where the workers run (the thread they share with the writer).
    let executor: any TaskExecutor

    func run() async {
        await withTaskExecutorPreference(executor) {
            await withGracefulShutdownHandler {
                await engine.run()
            } onGracefulShutdown: {
                engine.stop()
            }
        }
    }
}

/// SIGHUP: read the config file again and apply rules, templates and sinks without touching the hub connection.
/// A broken file is refused with the same message `config check` gives, and the running config stays.
struct Reloader {
    let current: RelaySettings
    let engine: RelayEngine
    let reload: @Sendable () async throws(ConfigErrors) -> (RelaySettings, AlertSettings)
    let logger: Logger

    func run(on hangups: UnixSignalsSequence) async {
        for await _ in hangups {
            Systemd.reloading()
            defer { Systemd.reloaded() }
            await reloadOnce()
        }
    }

    /// One reload; false when the configuration was refused (the running one stays).
    @discardableResult
    func reloadOnce() async -> Bool {
        do throws(ConfigErrors) {
            let (settings, relay) = try await reload()
            let summary = engine.reload(relay)
            logger.notice("reloaded the configuration: \(summary.description)")
            if settings.connectionFingerprint != current.connectionFingerprint {
                logger.warning(
                    "the server, store, status or telemetry settings changed: they apply at the next start (systemctl restart allowance-relay); rules, templates and sinks are applied now"
                )
            }
            return true
        } catch {
            logger.error("reload refused, still running with the previous configuration: \(error.message)")
            return false
        }
    }
}

/// A service that simply stops (is cancelled) at the graceful shutdown.
private func untilShutdown(_ body: @escaping @Sendable () async -> Void) -> ClosureService {
    ClosureService { await cancelWhenGracefulShutdown(body) }
}

/// Returns when the task is cancelled.
func untilCancelled() async {
    while !Task.isCancelled { try? await Task.sleep(for: .seconds(3600)) }
}
