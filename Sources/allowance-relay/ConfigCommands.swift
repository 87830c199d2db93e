import AllowanceAPI
import ArgumentParser
import Config
import Core
import Foundation
import Relay
import RelayDaemon
import SharedStore
import Store
import StoreContract

/// `allowance-relay config check`: the same checks `run` makes before it starts, without starting.
struct ConfigCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "config", abstract: "Check a configuration.", subcommands: [Check.self],
        defaultSubcommand: Check.self)

    struct Check: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Check the config file and the environment as `run` would, and say what is wrong.",
            discussion: Help.reflow(
                """
                Unknown keys (with "did you mean"), YAML syntax, bad values, URLs, templates and rules, unreadable
                or readable-by-others secret files: every mistake at once, each as FILE:LINE:COLUMN: KEY: what is
                wrong. Fix: how (a value from the environment names its variable instead). Exit 0 when `run` would
                start, 78 when it would refuse.

                --probe then tries what the file points at, as `run` would: the server (signs in and lists the
                children over REST), the hub (negotiate and the handshake on server.hub_path, the configured
                protocol and transports) and each sink (one test alert, as `notify test` sends). A failure names
                the URL requested and the likely fix. Exit 1 when any of them fails.

                Examples:
                  allowance-relay config check --config /etc/allowance-relay/relay.yaml
                  ALLOWANCE_RELAY_SERVER_URL=https://x.example allowance-relay config check --config relay.yaml --json
                  allowance-relay config check --config relay.yaml --probe
                """))

        @Option(
            name: .shortAndLong,
            help:
                "YAML config file (default: ~/.config/allowance-relay/relay.yaml, then /etc/allowance-relay/relay.yaml)."
        )
        var config: String?
        @Flag(help: "Print JSON instead of a sentence.") var json = false
        @Flag(help: "Also try the server and send a test alert to each sink.") var probe = false

        func run() async throws {
            var problems: [ConfigError] = []
            var summary = ""
            var loaded: (RelaySettings, AlertSettings)?
            do {
                let (settings, relay) = try await DaemonConfiguration.load(
                    file: ConfigSource.locate(config), environment: ProcessInfo.processInfo.environment)
                loaded = (settings, relay)
                let database =
                    settings.local.sharedStore.map { "shared database \($0) (replicas)" }
                    ?? "database \(settings.storePath)"
                summary =
                    "server \(settings.serverURL.redactedForLogs), \(database), "
                    + "\(relay.sinks.count) sink(s)\(relay.sinks.isEmpty ? "" : " (" + relay.sinks.map(\.name).joined(separator: ", ") + ")"), "
                    + "\(relay.rules.count) rule(s)"
                    + (settings.statusListen.map { ", status endpoint on \($0.host):\($0.port)" } ?? "")
            } catch {
                problems = error.all
            }
            let routing = loaded.map { Routing($0.1) }
            let warnings = (routing?.warnings ?? []) + (loaded?.0.insecureTLS == true ? [Self.insecureWarning] : [])
            var probes: [(what: String, ok: Bool, said: String)] = []
            if probe, let (settings, relay) = loaded {
                probes = await Self.probe(settings, relay)
            }
            if json {
                print(
                    ([
                        "ok": .bool(problems.isEmpty && probes.allSatisfy(\.ok)),
                        "problems": .array(
                            problems.map {
                                [
                                    "file": .string($0.file), "line": .number(String($0.line)),
                                    "column": .number(String($0.column)),
                                    "key": .string($0.key), "message": .string($0.message), "fix": .string($0.fix),
                                ]
                            }),
                        "summary": .string(summary),
                        "routing": .array(
                            routing?.routes.map {
                                ["sink": .string($0.sink), "alerts": .array($0.alerts.map { .string($0) })]
                            } ?? []),
                        "warnings": .array(warnings.map { .string($0) }),
                        "probes": .array(
                            probes.map { ["target": .string($0.what), "ok": .bool($0.ok), "result": .string($0.said)] }),
                    ] as JSONValue).serialized)
            } else if !problems.isEmpty {
                FileHandle.standardError.write(Data(ConfigErrors(problems).report.utf8))
            } else {
                print("Configuration OK: \(summary).")
                if let routing, !routing.routes.isEmpty {
                    print("Routing (sink: what reaches it):")
                    print(Table.render(routing.rows))
                }
                for w in warnings { print("warning: \(w)") }
                for p in probes { print("  \(p.ok ? "ok  " : "FAIL") \(p.what): \(p.said)") }
            }
            if !problems.isEmpty { throw ExitCode(78) }
            if !probes.allSatisfy(\.ok) { throw ExitCode(1) }
        }

        static let insecureWarning =
            "server.insecure_tls is on: no TLS certificate or host name is checked (negotiate, REST, every transport). For tests only: give a private CA with server.ca_file instead."

        /// The server (sign in, list the children) and each sink (a test alert), one after the other.
        static func probe(
            _ settings: RelaySettings, _ relay: AlertSettings
        ) async -> [(what: String, ok: Bool, said: String)] {
            var out: [(String, Bool, String)] = []
            // What `run` does first: the REST API, then the hub on its configured path, protocol and transports.
            for probe in [
                await ServerProbe.rest(settings, http: RelayCommand.http),
                await ServerProbe.hub(settings, http: RelayCommand.http),
            ] {
                out.append((probe.what, probe.ok, probe.said))
            }
            if let location = settings.local.sharedStore {
                // Connects and brings the schema up to date, as a replica's start would.
                do {
                    let shared = try SharedRelayStore.open(
                        location, password: try settings.local.storePassword(), replica: "config-check-\(getpid())")
                    let replicas = try shared.replicas().filter(\.alive).count
                    shared.close()
                    out.append(("shared database \(location)", true, "answered: \(replicas) replica(s) up"))
                } catch let error as StoreError {
                    out.append(("shared database \(location)", false, error.message))
                } catch {
                    out.append(("shared database \(location)", false, "\(error)"))
                }
            }
            for sink in relay.sinks {
                let outcome = await relay.sendTest(to: sink, http: RelayCommand.http)
                let said: String =
                    switch outcome {
                    case .delivered: "accepted a test alert"
                    case .retry(let r, _), .throttled(let r, _), .disable(let r), .rejected(let r), .unavailable(let r):
                        r
                    }
                out.append(("sink \(sink.name) (\(sink.kind.rawValue))", outcome == .delivered, said))
            }
            return out
        }
    }
}
