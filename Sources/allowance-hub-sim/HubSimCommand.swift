import ArgumentParser
import Foundation
import HubSimulator
import Logging

/// `allowance-hub-sim`: a stand-in Allowance Tracker backend for tests, the demo and benchmarks.
@main
struct HubSimCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "allowance-hub-sim",
        abstract: "A stand-in Allowance Tracker backend: REST API, SignalR hub and fault switches, on loopback.",
        discussion: """
            Prints one line, `listening http://HOST:PORT`, on stdout once it accepts connections.

            REST (bearer token):  POST /api/v1/auth/login {"email":"parent@example.com","password":"allowance"}
                                  GET /api/v1/children, /api/v1/children/{id}, /api/v1/children/{id}/transactions
                                  (newest first with limit/offset, or ?after=<sequence> for the catch-up form)
                                  POST /api/v1/transactions {"childId","amount","type":"Credit"|"Debit","description"}
                                  (honours Idempotency-Key)
            Hub:                  /hubs/family (negotiate v0/v1, JSON protocol, stateful reconnect):
                                  TransactionCreated, BalanceUpdated
            Backend down:         POST /_sim/down (REST answers 503, the hub refuses, no activity) and POST /_sim/up
            Fault switches:       POST /_sim/drop[?forget=true&before=N&detached=N] | refuse?seconds=T |
                                  close?allowReconnect=true&error=E |
                                  malformed?kind=json|type|args|unknown|incomplete | burst?count=N |
                                  rest?mode=slow[&ms=M]|fail|<status>&count=N | payload?mode=id|full | invoke?target=T | revoke | webhook (a receiver)
                                  restore?keep=N (a backup restored) | balance?child=ID&balance=X
                                  GET /_sim/stats
            With --state FILE the family (children, balances, transactions) survives a restart: the same backend
            comes back, where without it a restart is a reset backend (new family from the seed, same ids).

            Examples:
              allowance-hub-sim --port 0 --token dev-token
              allowance-hub-sim --port 5080 --token dev-token --rate 2 --burst 5
              allowance-hub-sim --port 5080 --token dev-token --rate 1 --state family.json
              allowance-hub-sim --port 5080 --token dev-token --transports long_polling --require-messagepack
            """
    )

    @Option(help: "Address to listen on (loopback by default).") var host = "127.0.0.1"
    @Option(help: "Port (0 picks a free one; the listening line tells which).") var port = 0
    @Option(help: "A bearer token to accept besides those the login endpoint issues.") var token: String?
    @Option(help: "Seed of the deterministic family and activity.") var seed: UInt64 = 42
    @Option(help: "Generated transactions per second (0: none).") var rate = 0.0
    @Option(help: "Transactions generated right after start.") var burst = 0
    @Option(help: "Children in the family (the three fixed ones, then generated ones).") var children = 3
    @Option(help: "Transactions already in the family at start, spread over the three years before (a large history).")
    var history = 0
    @Option(help: "TransactionCreated payload: full (the transaction object) or id (its id string).")
    var payload: Payload = .full
    @Option(help: "Seconds between server pings on an idle connection.") var keepAlive = 15.0
    @Option(help: "Seconds of client silence before the server drops it.") var clientTimeout = 30.0
    @Flag(help: "Send hub messages as Binary WebSocket frames.") var binaryFrames = false
    @Option(
        help: ArgumentHelp(
            "The transports negotiate offers, comma-separated, in order: websockets, server_sent_events, long_polling.",
            discussion: "Leave websockets out to play a server behind a proxy that strips the upgrade."))
    var transports = "websockets,server_sent_events,long_polling"
    @Flag(help: "Refuse JSON handshakes: only MessagePack clients get in.") var requireMessagepack = false
    @Option(help: "Seconds a long poll is held when there is nothing to send.") var longPollTimeout = 90.0
    @Option(help: "Keep the family in this file across restarts (written after each change).") var state: String?
    @Option(help: "Log level: trace, debug, info, notice, warning, error.") var logLevel = "info"

    enum Payload: String, ExpressibleByArgument, CaseIterable { case full, id }

    static let transportNames = [
        "websockets": "WebSockets", "server_sent_events": "ServerSentEvents", "long_polling": "LongPolling",
    ]
    var transportNames: [String] {
        transports.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
    }

    func validate() throws {
        guard (0...65535).contains(port) else { throw ValidationError("--port must be 0 to 65535.") }
        guard rate >= 0, burst >= 0 else { throw ValidationError("--rate and --burst cannot be negative.") }
        guard keepAlive > 0, clientTimeout > 0 else {
            throw ValidationError("--keep-alive and --client-timeout must be positive.")
        }
        guard longPollTimeout > 0 else { throw ValidationError("--long-poll-timeout must be positive.") }
        for name in transportNames where Self.transportNames[name] == nil {
            throw ValidationError("--transports: '\(name)' is not one of websockets, server_sent_events, long_polling.")
        }
        guard Logger.Level(rawValue: logLevel) != nil else {
            throw ValidationError("--log-level must be one of trace, debug, info, notice, warning, error.")
        }
    }

    func run() async throws {
        // Stop at once on SIGTERM/SIGINT: the simulator holds nothing unsaved (--state is written at each change).
        signal(SIGTERM) { _ in _exit(0) }
        signal(SIGINT) { _ in _exit(0) }
        let level = Logger.Level(rawValue: logLevel) ?? .info
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
        var config = SimulatorConfiguration()
        config.host = host
        config.port = port
        config.token = token
        config.seed = seed
        config.activityRate = rate
        config.burst = burst
        guard children >= 1 else { throw ValidationError("--children must be at least 1.") }
        guard history >= 0 else { throw ValidationError("--history cannot be negative.") }
        config.children = children
        config.history = history
        config.fullTransactionPayload = payload == .full
        config.keepAliveInterval = .seconds(keepAlive)
        config.clientTimeout = .seconds(clientTimeout)
        config.binaryFrames = binaryFrames
        config.transports = transportNames.compactMap { Self.transportNames[$0] }
        config.requireMessagePack = requireMessagepack
        config.longPollTimeout = .seconds(longPollTimeout)
        config.stateFile = state
        let simulator = HubSimulator(configuration: config)
        try await simulator.run { url in
            // Unbuffered, so a parent process reading our stdout sees the line at once.
            FileHandle.standardOutput.write(Data("listening \(url)\n".utf8))
        }
    }
}
