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

/// `run` as a ServiceGroup. Services start in this order and stop in the reverse one on SIGTERM/SIGINT:
///   trace exporter (with tracing on), status endpoint, relay workers, event writer, outbox poller, watchdog,
///   reloader, hub connection
/// so the hub link closes first (no new events), then the outbox poller, then the events received are stored,
/// then the workers finish the send each is in, the status endpoint answers until the end, and the last spans go. Past `gracePeriod`
/// whatever is left is cancelled; deliveries cut short are put back to pending. Then the database is checkpointed.
public struct Daemon: Sendable {
    let settings: RelaySettings
    /// The database it writes (read it freely: SQLite's WAL lets readers beside the writer).
    public let store: Store
    let engine: RelayEngine
    let metrics: RelayMetrics
    let reload: @Sendable () async throws(ConfigErrors) -> (RelaySettings, RelayConfig)
    /// The process's one HTTP client: negotiate, REST and the sinks share its connections.
    let http: HTTPClient
    let logger: Logger

    public static let gracePeriod: Duration = .seconds(10)
    private let control = Control()

    /// The running group, for `stop()`; a stop asked before the group exists is kept until it does.
    private final class Control: Sendable {
        let state = Mutex<(group: ServiceGroup?, stopAsked: Bool)>((nil, false))
    }

    /// The parts already made; `start` makes them as `run` does.
    init(
        settings: RelaySettings, store: Store, engine: RelayEngine, metrics: RelayMetrics, http: HTTPClient,
        reload: @escaping @Sendable () async throws(ConfigErrors) -> (RelaySettings, RelayConfig), logger: Logger
    ) {
        self.settings = settings
        self.store = store
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
        let exporter = TracingSetup.exporter(settings, http: http, logger: logger)
        let tokens = settings.tokenSource(http: http)  // one source for the hub and REST: one login, one renewal
        let connection = HubConnection(
            url: settings.hubURL, options: Self.hubOptions(settings, http: http, tokens: tokens),
            logger: Logger(label: "signalr"))
        let link = LinkMonitor(store: store, logger: logger)
        let sync = SyncCoordinator(
            store: store, api: settings.apiClient(tokens: tokens, http: http),
            limits: .init(
                maxAttempts: settings.local.outboxMaxAttempts, maxAge: Double(settings.local.outboxMaxAgeDays) * 86400),
            tracing: settings.otlpEndpoint != nil, logger: logger)
        await sync.onCaughtUp { [engine] in engine.familyChanged() }
        // The one hand-off between the hub link and the store: bounded, so a slow disk holds the hub back by TCP.
        // A few commits' worth (the writer takes up to 1,000 events per commit): more only holds memory.
        let received = HubEventBuffer<HubEvent>(capacity: 4_000)
        await connection.on(
            HubEvent.decoder { [logger] problem in logger.error("could not read a hub event: \(problem)") },
            into: received)
        let hub = HubService(
            connection: connection, events: await connection.events(), sync: sync, engine: engine, link: link,
            metrics: metrics,
            logger: logger)

        let relayThread = ThreadExecutor(name: "relay")
        defer { relayThread.shutdown() }  // after the group, whose tasks prefer it; returns once the thread has ended
        var services: [ServiceGroupConfiguration.ServiceConfiguration] = []
        func add(_ service: some Service, _ name: String) {
            services.append(
                .init(
                    service: service, successTerminationBehavior: .gracefullyShutdownGroup,
                    failureTerminationBehavior: .gracefullyShutdownGroup, serviceName: name))
        }
        // First, so that it stops last: the spans of the others' last moments are sent.
        if let exporter { add(exporter, "trace exporter") }
        if let listen = settings.statusListen {
            add(
                StatusEndpoint(
                    host: listen.host, port: listen.port, store: store, link: link, metrics: metrics, logger: logger
                ).service, "status endpoint")
        }
        // The writer and the workers share one thread: the writer's commit reaches the workers, and a worker's send
        // its outcome, as jobs queued on that thread rather than wake-ups of pool threads. It is not the connection's
        // thread: a burst is decoded there while the last one commits here.
        add(RelayService(engine: engine, executor: relayThread), "relay")
        // Stops after the hub: what the connection delivered is stored before the end.
        add(
            EventWriter(
                events: received, sync: sync, store: store, metrics: metrics, json: settings.logFormat == .json,
                executor: relayThread, logger: logger), "store")
        let reloader = Reloader(current: settings, engine: engine, reload: reload, logger: logger)
        // Writes queued by another process signal (SIGUSR1, below); the poll is the fallback for a signal that
        // could not be sent, and the clock for retries that fall due.
        add(untilShutdown { await sync.pollOutbox(every: .seconds(60)) }, "outbox")
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
                    for await _ in signals.databaseChanged { await Self.databaseChanged(engine: engine, sync: sync) }
                }, "changes from the CLI")
        }
        add(hub, "hub")

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
        Self.checkIntegrityInBackground(store, logger: logger)
        link.set(.connecting, detail: "starting")
        // Ready once the database is open and the workers run: the hub may be away for long, and the relay is
        // doing its job meanwhile (outbox, deliveries, reconnecting).
        Systemd.ready(status: "connecting to \(settings.hubURL.host() ?? "the hub")")
        // Our own signal handling rather than the group's, to say which signal arrived.
        let stopping = Task {
            guard let signals else { return }
            var stopping = false
            for await signal in signals.stop {
                logger.notice(
                    stopping ? "received \(signal) again: already stopping" : "received \(signal), stopping gracefully")
                if !stopping { await group.triggerGracefulShutdown() }
                stopping = true
            }
        }
        defer { stopping.cancel() }
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
        do {
            try store.checkpoint()
        } catch {
            logger.warning(
                "could not checkpoint the database at stop (harmless: SQLite does it at the next open): \(error)")
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

    /// What SIGUSR1 does: the mutes read again and the outbox drained now, not at the next poll.
    private static func databaseChanged(engine: RelayEngine, sync: SyncCoordinator) async {
        engine.mutesChanged()
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
        await group?.triggerGracefulShutdown()
    }

    /// The hub connection's options, from the settings: one for the daemon and for a replica's link.
    static func hubOptions(
        _ settings: RelaySettings, http: HTTPClient, tokens: (any TokenSource)?
    ) -> HubConnectionOptions {
        var options = HubConnectionOptions()
        if let tokens {
            options.accessTokenProvider = { try await tokens.token() }
            options.accessTokenRefused = { await tokens.refused() }
        }
        options.accessTokenInQuery = settings.accessTokenInQuery
        options.skipNegotiation = settings.skipNegotiation
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

/// The RelayDaemon module's one error: what ends the daemon, with its exit code (documented in `run --help`) and
/// the reason. Configuration mistakes are `ConfigErrors` and the store's `StoreError`: the executable maps those.
struct DaemonError: Error, CustomStringConvertible {
    let exitCode: Int32
    let message: String
    var description: String { message }
}

/// The hub connection: events into the sync engine, link changes to the relay, the status endpoint and systemd.
struct HubService: Service {
    let connection: HubConnection
    let events: AsyncStream<HubConnectionEvent>
    let sync: SyncCoordinator
    let engine: RelayEngine
    let link: LinkMonitor
    let metrics: RelayMetrics
    let logger: Logger

    func run() async throws {
        let stopping = StopFlag()
        try await withGracefulShutdownHandler {
            do throws(HubConnectionError) {
                try await connection.start()
            } catch {
                if stopping.isSet { return }
                throw DaemonError(
                    exitCode: error.kind == .unauthorized ? 77 : 1, message: "could not connect: \(error.message)")
            }
            for await event in events {
                switch event {
                case .connected(let id), .reconnected(let id):
                    logger.info("connected to the hub", metadata: ["connectionId": "\(id ?? "-")"])  // the client's line says how
                    if case .reconnected = event { metrics.reconnects.increment() }
                    let transport = await connection.transport
                    link.set(
                        .connected, connectionId: id, transport: transport?.rawValue,
                        hubProtocol: connection.hubProtocol.rawValue,
                        detail: "connected")
                    Systemd.status("connected to the hub")
                    // A new connection lost whatever was sent while there was none: fetch it.
                    engine.linkRestored()
                    await sync.linkRestored()
                case .reconnecting(let reason):
                    // Not logged here: the hub client's warning and the sync state's line already say it.
                    link.set(.reconnecting, detail: reason)
                    Systemd.status("reconnecting: \(reason)")
                    engine.linkLost(reason)
                    await sync.linkLost(reason)
                case .closed(let error):
                    if let error, !stopping.isSet {
                        throw DaemonError(
                            exitCode: error.kind == .unauthorized ? 77 : 1,
                            message: "the hub connection ended: \(error.message)")
                    }
                    return
                }
            }
        } onGracefulShutdown: {
            stopping.set()
            logger.info("closing the hub connection, then finishing the deliveries in flight")
            Systemd.stopping()
            Task { await connection.stop() }
        }
    }
}

/// Stores the hub events the connection decoded, a burst per SQLite transaction; at the stop, what is left.
struct EventWriter: Service {
    let events: HubEventBuffer<HubEvent>
    let sync: SyncCoordinator
    let store: Store
    let metrics: RelayMetrics
    let json: Bool
    let executor: any TaskExecutor
    let logger: Logger

    func run() async {
        await withTaskExecutorPreference(executor) { await write() }
    }

    private func write() async {
        let (metrics, json, logger, store) = (metrics, json, logger, store)
        // The children's names for the log lines, read again when an event names a child not seen yet.
        var names: [UUID: String] = [:]
        await withGracefulShutdownHandler {
            await sync.store(from: events) { batch in
                for event in batch {
                    metrics.hubEvent(event.target)
                    if json {
                        logger.info("hub event", metadata: ["event": .string(event.jsonText)])
                    } else if logger.logLevel <= .info {
                        let child = event.childId
                        if let child, names[child] == nil, let children = try? store.children() {
                            names = Dictionary(children.map { ($0.id, $0.firstName) }, uniquingKeysWith: { a, _ in a })
                        }
                        logger.info("\(event.summary(childName: child.flatMap { names[$0] }))")
                    }
                }
            } handled: { batch in
                // The commit's moment at microseconds on the wall clock, the hub's send clock on one machine:
                // the benchmark's hub-to-commit latency is read from this line.
                guard logger.logLevel <= .debug else { return }
                let ids = batch.compactMap { event -> String? in
                    if case .transactionCreated(let t) = event { t.id.uuidString.lowercased() } else { nil }
                }
                logger.debug(
                    "stored \(batch.count) hub event(s)",
                    metadata: [
                        "transactions": .string(ids.joined(separator: ",")),
                        "unix_us": .stringConvertible(Int64((Date().timeIntervalSince1970 * 1e6).rounded())),
                    ])
            }
        } onGracefulShutdown: {
            events.finish()
        }
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
    let reload: @Sendable () async throws(ConfigErrors) -> (RelaySettings, RelayConfig)
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
