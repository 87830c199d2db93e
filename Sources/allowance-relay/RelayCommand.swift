import ArgumentParser
import Foundation
import HTTPTransport

@main
struct RelayCommand: AsyncParsableCommand {
    static let version = "0.1.0"
    /// The process's one HTTP client (negotiate, REST, every sink): one thread, one pool of connections.
    static let http = HTTPClient(userAgent: "allowance-relay/\(version) (Linux)")

    static let configuration = CommandConfiguration(
        commandName: "allowance-relay",
        abstract: "Watches an Allowance Tracker backend over SignalR and relays what happens.",
        discussion: """
            Configuration comes from a YAML file (--config) with ALLOWANCE_RELAY_* environment variables on top:
              ALLOWANCE_RELAY_SERVER_URL         backend base URL (the hub is at <url>/hubs/family)
              ALLOWANCE_RELAY_SERVER_TOKEN       bearer token (or ALLOWANCE_RELAY_SERVER_TOKEN_FILE, mode 600)
              ALLOWANCE_RELAY_STORE_PATH         local database (default: $XDG_STATE_HOME/allowance-relay/relay.sqlite)
              ALLOWANCE_RELAY_LOG_LEVEL          trace | debug | info | notice | warning | error
              ALLOWANCE_RELAY_LOG_FORMAT         text | json
            See config/reference.yaml for every key.
            """,
        version: version,
        subcommands: [
            RunCommand.self, StatusCommand.self, BalancesCommand.self, TransactionsCommand.self, TransactionCommand.self,
            OutboxCommand.self, DeliveriesCommand.self, NotifyCommand.self, ConfigCommand.self, StoreCommand.self,
        ],
        defaultSubcommand: RunCommand.self
    )
}
