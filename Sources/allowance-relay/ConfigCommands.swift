import AllowanceAPI
import ArgumentParser
import Foundation
import Relay
import SignalRProtocol

/// `allowance-relay config check`: the same checks `run` makes before it starts, without starting.
struct ConfigCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "config", abstract: "Check a configuration.", subcommands: [Check.self], defaultSubcommand: Check.self)

    struct Check: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Check the config file and the environment as `run` would, and say what is wrong.",
            discussion: """
                Unknown keys, bad values, bad URLs, bad templates and rules, unreadable or readable-by-others secret
                files: each is reported with the file, the line, the key and a fix. Exit 0 when `run` would start,
                78 when it would refuse.

                Examples:
                  allowance-relay config check --config /etc/allowance-relay/relay.yaml
                  ALLOWANCE_RELAY_SERVER_URL=https://x.example allowance-relay config check --config relay.yaml --json
                """)

        @Option(name: .shortAndLong, help: "YAML config file.") var config: String?
        @Flag(help: "Print JSON instead of a sentence.") var json = false

        func run() async throws {
            var problem: String?
            var summary = ""
            do {
                let settings = try await RelaySettings.load(file: config)
                try settings.checkSecretFiles()
                do {
                    let relay = try RelayConfig.load(file: config)
                    summary = "server \(settings.serverURL.absoluteString), database \(settings.storePath), "
                        + "\(relay.sinks.count) sink(s)\(relay.sinks.isEmpty ? "" : " (" + relay.sinks.map(\.name).joined(separator: ", ") + ")"), "
                        + "\(relay.rules.count) rule(s)"
                } catch {
                    problem = "\(error)"
                }
            } catch {
                problem = error.message
            }
            if json {
                print((["ok": .bool(problem == nil), "error": problem.map { .string($0) } ?? .null, "summary": .string(summary)] as JSONValue).serialized)
            } else if let problem {
                FileHandle.standardError.write(Data("allowance-relay: configuration error: \(problem)\n".utf8))
            } else {
                print("Configuration OK: \(summary).")
            }
            if problem != nil { throw ExitCode(78) }
        }
    }
}
