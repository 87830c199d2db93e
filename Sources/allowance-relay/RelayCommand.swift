import ArgumentParser
import Foundation
import HTTPTransport
import Relay

struct RelayCommand: AsyncParsableCommand {
    static let version = RelayInfo.version
    /// The process's one HTTP client (negotiate, REST, every sink): one thread, one pool of connections. The thread
    /// is named "relay": the daemon's sink workers (and on a file, its store writer) run there too.
    static let http = HTTPClient(userAgent: "allowance-relay/\(version) (Linux)", threadName: "relay")

    static let configuration = CommandConfiguration(
        commandName: "allowance-relay",
        abstract: "Watches an Allowance Tracker backend over SignalR and relays what happens.",
        discussion: Help.reflow(
            """
            Configuration comes from a YAML file (--config) with ALLOWANCE_RELAY_* environment variables on top:
              ALLOWANCE_RELAY_SERVER_URL         backend base URL (the hub is at <url>/hubs/family)
              ALLOWANCE_RELAY_SERVER_TOKEN       bearer token (or ALLOWANCE_RELAY_SERVER_TOKEN_FILE, mode 600)
              ALLOWANCE_RELAY_STORE_PATH         local database (default: $XDG_STATE_HOME/allowance-relay/relay.sqlite)
              ALLOWANCE_RELAY_LOG_LEVEL          trace | debug | info | notice | warning | error
              ALLOWANCE_RELAY_LOG_FORMAT         text | json
            See config/reference.yaml for every key.

            Exit codes: 0 done; 1 failed; 64 a wrong argument; 65 an argument naming nothing that exists (no such
            child or sink); 69 nothing to read yet (no database: run the relay first); 74 the database cannot be
            read; 77 the token was refused; 78 the configuration is invalid.
            """),
        version: "\(version) (commit \(BuildStamp.commit))",
        subcommands: [
            RunCommand.self, StatusCommand.self, BalancesCommand.self, TransactionsCommand.self,
            TransactionCommand.self,
            OutboxCommand.self, DeliveriesCommand.self, NotifyCommand.self, SummaryCommand.self, MuteCommand.self,
            ConfigCommand.self, StoreCommand.self, GoalsCommand.self,
        ],
        defaultSubcommand: RunCommand.self
    )

    /// The parser's own main, but a command's failure (`CLIError`) is said on one line without a usage line that
    /// does not apply, and ends with its sysexits code.
    static func main() async {
        LibCrypto.skipCleanupAtExit()
        do {
            var command = try parseAsRoot()
            if var command = command as? AsyncParsableCommand {
                try await command.run()
            } else {
                try command.run()
            }
        } catch let error as CLIError {
            FileHandle.standardError.write(Data("allowance-relay: \(error.description)\n".utf8))
            Foundation.exit(error.code)
        } catch {
            exit(withError: error)
        }
    }
}

/// Help text written as paragraphs: the lines of a paragraph are joined, so that the argument parser wraps it to
/// the terminal's width (hard-wrapped at 100 columns it came out ragged in an 80-column terminal). Blank lines
/// part paragraphs; an indented line (an example, a list) stays a line of its own.
enum Help {
    static func reflow(_ text: String) -> String {
        var out: [String] = []
        var paragraph: [String] = []
        func flush() {
            if !paragraph.isEmpty { out.append(paragraph.joined(separator: " ")) }
            paragraph = []
        }
        for line in text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init) {
            if line.trimmingCharacters(in: .whitespaces).isEmpty {
                flush()
                out.append("")
            } else if line.first == " " || line.hasPrefix("- ") || line.hasSuffix(":") {
                flush()
                out.append(line)
            } else {
                paragraph.append(line)
            }
        }
        flush()
        return out.joined(separator: "\n")
    }
}
