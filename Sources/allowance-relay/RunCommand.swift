import AllowanceAPI
import ArgumentParser
import Config
import Foundation
import Logging
import Relay
import RelayDaemon

/// `allowance-relay run`: connect, log every hub event, reconnect forever, stop cleanly on a signal.
struct RunCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "run",
        abstract: "Connect to the hub and log each TransactionCreated / BalanceUpdated as it arrives.",
        discussion: Help.reflow(
            """
            Runs until SIGTERM or SIGINT, then stops gracefully and exits 0: the hub connection is closed (a SignalR
            Close, then a WebSocket close), each sink finishes the send it is in (for up to 10 s; a send cut short is
            sent again at the next start, with the same id), and the database is checkpointed.
            SIGHUP reads the config file again and applies rules, templates and sinks without dropping the hub
            connection; a broken file is refused with the same message as `config check` and the old config stays.
            A lost connection is retried forever (exponential back-off with jitter, at most 60 s apart);
            so is the first connect, so the relay may start before the backend.

            Every event is stored in the local database (store.path), once, in one SQLite transaction with what it
            changes and the alerts it causes; at each connect, and whenever an event shows a gap, missed transactions
            are fetched over REST.

            With status.listen set (e.g. 127.0.0.1:9464), GET /healthz answers 200 or 503 with the reasons, and
            GET /metrics gives Prometheus text.

            Exit codes: 0 stopped by a signal; 1 the connection ended for good (e.g. the server closed it
            without allowing a reconnect) or the status endpoint could not listen; 74 the database cannot be opened (a corrupt one: use --rebuild);
            77 the token was refused; 78 the configuration is invalid.

            Examples:
              allowance-relay run --config /etc/allowance-relay/relay.yaml
              ALLOWANCE_RELAY_SERVER_URL=http://127.0.0.1:5080 ALLOWANCE_RELAY_SERVER_TOKEN=dev-token allowance-relay run
              allowance-relay run --config config/demo.yaml --log-format json 2>&1 | jq .   # logs go to stderr
            """)
    )

    @Option(
        name: .shortAndLong,
        help:
            "YAML config file (default: ~/.config/allowance-relay/relay.yaml, then /etc/allowance-relay/relay.yaml; the environment alone is enough)."
    )
    var config: String?

    @Option(help: "Override log.level: trace, debug, info, notice, warning, error.")
    var logLevel: String?

    @Option(help: "Override log.format: text (for people and journald) or json (one object per line).")
    var logFormat: String?

    @Flag(help: "Move an unreadable database aside (kept as <path>.broken-<time>) and rebuild it from the server.")
    var rebuild = false

    func run() async throws {
        // First of all (and so before READY=1): a SIGTERM while the config is read or the database opened (a service
        // manager stopping us right after the start) would otherwise kill the process outright. Trapped, it waits
        // for the daemon, which then stops gracefully and exits 0.
        // SIGHUP and SIGUSR1 (`allowance-relay mute` and the other writers) too: each waits for the daemon.
        let signals = await DaemonSignals.trap()
        var environment = ProcessInfo.processInfo.environment
        if let logLevel { environment["ALLOWANCE_RELAY_LOG_LEVEL"] = logLevel }
        if let logFormat { environment["ALLOWANCE_RELAY_LOG_FORMAT"] = logFormat }
        let (file, env) = (ConfigSource.locate(config, environment: environment), environment)
        let load = { @Sendable () async throws(ConfigErrors) -> (RelaySettings, AlertSettings) in
            try await DaemonConfiguration.load(file: file, environment: env)
        }
        let (settings, relayConfig): (RelaySettings, AlertSettings)
        do {
            (settings, relayConfig) = try await load()
        } catch {
            FileHandle.standardError.write(Data(error.report.utf8))
            throw ExitCode(78)
        }
        LogSetup.bootstrap(level: Logger.Level(rawValue: settings.logLevel) ?? .info, format: settings.logFormat)
        let logger = Logger(label: "allowance-relay")
        let metrics = RelayMetrics()  // before the engine: its workers make their metrics at init
        let daemon: Daemon
        do {
            daemon = try Daemon.start(
                settings: settings, relayConfig: relayConfig, rebuild: rebuild, metrics: metrics,
                http: RelayCommand.http, reload: load,
                logger: logger)
        } catch {
            logger.critical("\(error)")
            throw ExitCode(74)
        }
        let code = await daemon.run(signals: signals)
        if code != 0 { throw ExitCode(code) }
    }
}
