import Foundation

/// How the simulator runs. Every switch can also be flipped at run time under `/_sim/`.
public struct SimulatorConfiguration: Sendable {
    public var host = "127.0.0.1"
    /// 0 picks a free port; the `listening` line says which.
    public var port = 0
    /// Accepted as a bearer token besides those the login endpoint issues.
    public var token: String?
    /// How long tokens from `POST /api/v1/auth/login` live.
    public var tokenLifetime: Duration = .seconds(3600)
    public var seed: UInt64 = 42
    /// `TransactionCreated` carries the whole transaction (true) or only its id string (as older servers send it).
    public var fullTransactionPayload = true
    /// Generated transactions per second (0: none).
    public var activityRate = 0.0
    /// Transactions generated at start.
    public var burst = 0
    /// Children in the family: the three fixed ones, and generated ones beyond three.
    public var children = 3
    /// Transactions already in the family at start, spread over the three years before (a large history).
    public var history = 0
    /// Server pings every this often when nothing else was sent.
    public var keepAliveInterval: Duration = .seconds(15)
    /// A client silent for this long is dropped.
    public var clientTimeout: Duration = .seconds(30)
    /// Send hub messages as Binary frames (some servers do).
    public var binaryFrames = false
    /// The transports negotiate offers, in this order (a proxy that strips WebSocket upgrades: leave WebSockets out).
    public var transports = ["WebSockets", "ServerSentEvents", "LongPolling"]
    /// Refuse the JSON protocol: only MessagePack clients get in.
    public var requireMessagePack = false
    /// How long a poll is held when there is nothing to send (ASP.NET Core: 90 s).
    public var longPollTimeout: Duration = .seconds(90)
    /// Where the family is kept across restarts (nil: a fresh family from the seed each start). Written after each
    /// change, so a restarted simulator is the same backend, not a reset one.
    public var stateFile: String?

    public init() {}
}
