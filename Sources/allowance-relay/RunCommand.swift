import AllowanceAPI
import ArgumentParser
import Foundation
import Logging
import SignalRClient
import SignalRProtocol
import Relay
import Store
import Sync

/// `allowance-relay run`: connect, log every hub event, reconnect forever, stop cleanly on a signal.
struct RunCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "run",
        abstract: "Connect to the hub and log each TransactionCreated / BalanceUpdated as it arrives.",
        discussion: """
            Runs until SIGTERM or SIGINT, then closes the hub connection gracefully and exits 0.
            A lost connection is retried forever (exponential back-off with jitter, at most 60 s apart);
            so is the first connect, so the relay may start before the backend.

            Every event is stored in the local database (store.path) in the same SQLite transaction as its inbox
            row; at each connect, and whenever an event shows a gap, missed transactions are fetched over REST.

            Exit codes: 0 stopped by a signal; 1 the connection ended for good (e.g. the server closed it
            without allowing a reconnect); 74 the database cannot be opened (a corrupt one: use --rebuild);
            77 the token was refused; 78 the configuration is invalid.

            Examples:
              allowance-relay run --config /etc/allowance-relay/relay.yaml
              ALLOWANCE_RELAY_SERVER_URL=http://127.0.0.1:5080 ALLOWANCE_RELAY_SERVER_TOKEN=dev-token allowance-relay run
              allowance-relay run --config config/demo.yaml --log-format json | jq .
            """
    )

    @Option(name: .shortAndLong, help: "YAML config file (optional: the environment alone is enough).")
    var config: String?

    @Option(help: "Override log.level: trace, debug, info, notice, warning, error.")
    var logLevel: String?

    @Option(help: "Override log.format: text (for people and journald) or json (one object per line).")
    var logFormat: String?

    @Flag(help: "Move an unreadable database aside (kept as <path>.broken-<time>) and rebuild it from the server.")
    var rebuild = false

    func run() async throws {
        var environment = ProcessInfo.processInfo.environment
        if let logLevel { environment["ALLOWANCE_RELAY_LOG_LEVEL"] = logLevel }
        if let logFormat { environment["ALLOWANCE_RELAY_LOG_FORMAT"] = logFormat }
        let settings: RelaySettings
        do {
            settings = try await RelaySettings.load(file: config, environment: environment)
        } catch {
            FileHandle.standardError.write(Data("allowance-relay: configuration error: \(error.message)\n".utf8))
            throw ExitCode(78)
        }
        let relayConfig: RelayConfig
        do {
            relayConfig = try RelayConfig.load(file: config, environment: environment)
        } catch {
            FileHandle.standardError.write(Data("allowance-relay: configuration error: \(error)\n".utf8))
            throw ExitCode(78)
        }
        LogSetup.bootstrap(level: Logger.Level(rawValue: settings.logLevel) ?? .info, format: settings.logFormat)
        let logger = Logger(label: "allowance-relay")
        do {
            try settings.checkSecretFiles()
        } catch {
            logger.critical("\(error.message)")
            throw ExitCode(78)
        }
        let store: Store
        do {
            if rebuild, FileManager.default.fileExists(atPath: settings.storePath) {
                let aside = try Store.moveAside(path: settings.storePath)
                logger.notice("moved the old database aside to \(aside); rebuilding from the server")
            }
            store = try Store.open(path: settings.storePath, durability: settings.storeDurability == "normal" ? .normal : .full)
            let pruned = try store.prune(transactionDays: settings.local.keepTransactionsDays)
            if pruned.inbox > 0 { logger.info("pruned \(pruned.inbox) inbox row(s) older than 7 days") }
            if pruned.transactions > 0 {
                logger.info("pruned \(pruned.transactions) transaction(s) older than \(settings.local.keepTransactionsDays ?? 0) days")
            }
            let requeued = try store.requeueInFlight()
            if requeued > 0 { logger.notice("\(requeued) outbox write(s) were in flight at the last stop: sending them again (idempotent)") }
        } catch {
            logger.critical("\(error)")
            throw ExitCode(74)
        }
        let engine = RelayEngine(store: store, config: relayConfig, logger: logger)
        do {
            try engine.install()
        } catch {
            logger.critical("\(error)")
            throw ExitCode(74)
        }
        let code = await Daemon(settings: settings, store: store, engine: engine, logger: logger).run()
        if code != 0 { throw ExitCode(code) }
    }
}

/// Wires the hub connection to the sync engine, the relay's workers and process signals.
struct Daemon {
    let settings: RelaySettings
    let store: Store
    let engine: RelayEngine
    let logger: Logger

    func run() async -> Int32 {
        var options = HubConnectionOptions()
        let settings = self.settings
        let tokens = settings.tokenSource()
        if let tokens {
            options.accessTokenProvider = { try await tokens.token() }
            options.accessTokenRefused = { await tokens.refused() }
        }
        options.accessTokenInQuery = settings.accessTokenInQuery
        options.skipNegotiation = settings.skipNegotiation
        options.userAgent = "allowance-relay/\(RelayCommand.version) (Linux)"
        options.reconnectPolicy = ExponentialRetryPolicy()
        options.startRetryPolicy = ExponentialRetryPolicy()
        options.webSocket.caFile = settings.caFile
        options.webSocket.allowInsecureTLS = settings.insecureTLS
        let connection = HubConnection(url: settings.hubURL, options: options, logger: Logger(label: "signalr"))
        let logger = self.logger
        let json = settings.logFormat == .json
        let sync = SyncCoordinator(
            store: store, api: APIClient(baseURL: settings.serverURL, tokens: tokens),
            limits: .init(maxAttempts: settings.local.outboxMaxAttempts, maxAge: Double(settings.local.outboxMaxAgeDays) * 86400),
            logger: logger)
        for target in HubEvent.targets {
            await connection.on(target) { (args: HubArguments) in
                do throws(PayloadError) {
                    let event = try HubEvent(target: target, arguments: args)
                    if json {
                        logger.info("hub event", metadata: ["event": .string(event.json.serialized)])
                    } else {
                        logger.info("\(event.summary)")
                    }
                    await sync.handle(event)
                } catch {
                    // A payload we cannot read is reported and skipped; the connection carries on.
                    logger.error("could not read a hub event: \(error.message)")
                }
            }
        }
        let events = await connection.events()
        let signals = SignalWatcher([SIGINT, SIGTERM])
        logger.info("starting", metadata: ["hub": "\(settings.hubURL.redactedForLogs)"])
        // Ready once the database is open and the workers run: the hub may be away for long, and the relay is
        // doing its job meanwhile (outbox, deliveries, reconnecting).
        Systemd.ready(status: "connecting to \(settings.hubURL.host() ?? "the hub")")

        return await withTaskGroup(of: Int32.self) { group in
            group.addTask {
                do throws(HubConnectionError) {
                    try await connection.start()
                } catch {
                    logger.critical("could not connect: \(error.message)")
                    return error.kind == .unauthorized ? 77 : 1
                }
                for await event in events {
                    switch event {
                    case .connected(let id), .reconnected(let id):
                        logger.info("connected to the hub", metadata: ["connectionId": "\(id ?? "-")"])
                        Systemd.status("connected to the hub")
                        // A new connection lost whatever was sent while there was none: fetch it.
                        engine.linkRestored()
                        await sync.requestCatchUp()
                    case .reconnecting(let reason):
                        logger.warning("connection lost, reconnecting: \(reason)")
                        Systemd.status("reconnecting: \(reason)")
                        engine.linkLost(reason)
                        await sync.linkLost(reason)
                    case .closed(let error):
                        if let error {
                            logger.critical("the hub connection ended: \(error)")
                            return 1
                        }
                        return 0
                    }
                }
                return 0
            }
            group.addTask {
                await sync.pollOutbox(every: .seconds(5))
                return 0
            }
            group.addTask {
                await Systemd.watchdog()
                await untilCancelled()
                return 0
            }
            group.addTask {
                await engine.run()
                await untilCancelled()  // no sinks, or no watchdog: this part must not end the daemon
                return 0
            }
            group.addTask {
                guard let signal = await signals.next() else { return 0 }  // cancelled: the relay ended on its own
                logger.notice("received \(signal == SIGINT ? "SIGINT" : "SIGTERM"), closing the hub connection")
                Systemd.stopping()
                await connection.stop()
                return 0
            }
            let code = await group.next() ?? 0
            group.cancelAll()
            await connection.stop()
            return code
        }
    }
}

/// Returns when the task is cancelled.
private func untilCancelled() async {
    while !Task.isCancelled { try? await Task.sleep(for: .seconds(3600)) }
}

/// Delivers process signals as async values (the default handlers are turned off for them).
/// `@unchecked Sendable`: the dispatch sources are only kept alive here, never touched after init.
final class SignalWatcher: @unchecked Sendable {
    private let stream: AsyncStream<Int32>
    private let sources: [any DispatchSourceSignal]

    init(_ signals: [Int32]) {
        let (stream, continuation) = AsyncStream<Int32>.makeStream()
        self.stream = stream
        sources = signals.map { sig in
            signal(sig, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: sig, queue: .global())
            source.setEventHandler { continuation.yield(sig) }
            source.resume()
            return source
        }
    }

    /// The next signal, or nil when the waiting task is cancelled.
    func next() async -> Int32? {
        for await s in stream { return s }
        return nil
    }
}
