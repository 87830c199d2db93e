import AllowanceAPI
import Core
import Foundation

/// What the status endpoint (`/healthz`, `/metrics`) and `status` read of a store, and the daemon's link state it
/// writes: the same on either backend. On the shared database each replica keeps its own link state.
public protocol StatusSource: Sendable {
    /// This process's hub link, recorded on each change.
    func setLinkStatus(_ status: LinkStatus) throws(StoreError)
    func syncStatus() throws(StoreError) -> SyncStatus?
    /// Sinks switched off (by a 410 or the like) and why.
    func disabledSinks() throws(StoreError) -> [String: String]
    /// The sinks failing now, as their workers recorded it.
    func sinkHealth() throws(StoreError) -> [String: SinkHealth]
    /// Writes still owed to the server.
    func outboxWaiting() throws(StoreError) -> Int
    func contact() throws(StoreError) -> StoreContact
    /// What the store takes on disk (the SQLite file and its WAL; the PostgreSQL database).
    func storageBytes() throws(StoreError) -> Int64
}

/// When the server was last heard from: what the daemon's metrics, its outbox and the staleness flag of every
/// command read, without the counts of `summary` (which read every transaction).
public struct StoreContact: Sendable {
    public var lastCatchUp: Date?
    /// The last event pushed by the hub (not caught up); nil once pruned, or never.
    public var lastEvent: Date?
    /// The last time anything came from the server (a hub event or a catch-up).
    public var lastContact: Date?

    public init(lastCatchUp: Date?, lastEvent: Date?, lastContact: Date?) {
        self.lastCatchUp = lastCatchUp
        self.lastEvent = lastEvent
        self.lastContact = lastContact
    }
}

/// Where synchronisation stands, persisted so that `status` (another process) can show it.
public struct SyncStatus: Sendable, Equatable {
    public enum Phase: String, Sendable {
        /// Caught up; nothing waiting.
        case idle
        /// Catching up or sending the outbox.
        case syncing
        /// The backend cannot be reached; writes wait in the outbox.
        case offline
        /// The backend answered with something a retry alone will not fix.
        case error
    }

    public var phase: Phase
    public var detail: String
    public var since: Date
    public var nextRetry: Date?

    public init(phase: Phase, detail: String, since: Date = Date(), nextRetry: Date? = nil) {
        self.phase = phase
        self.detail = detail
        self.since = since
        self.nextRetry = nextRetry
    }

    public var json: JSONValue {
        [
            "phase": .string(phase.rawValue), "detail": .string(detail), "since": .string(ISODate.string(since)),
            "nextRetry": nextRetry.map { .string(ISODate.string($0)) } ?? .null,
        ]
    }

    public init?(json: JSONValue) {
        guard let p = json["phase"]?.stringValue.flatMap(Phase.init(rawValue:)),
            let since = json["since"]?.stringValue.flatMap(ISODate.parse)
        else { return nil }
        self.init(
            phase: p, detail: json["detail"]?.stringValue ?? "", since: since,
            nextRetry: json["nextRetry"]?.stringValue.flatMap(ISODate.parse))
    }
}

/// The running daemon's hub link, persisted on each change so that `status` (another process) can show it.
public struct LinkStatus: Sendable, Equatable {
    public enum State: String, Sendable {
        case connecting, connected, reconnecting, stopped
        /// A replica while another holds the hub link: ready to take it, doing its share of the deliveries.
        case standby
    }

    public var state: State
    public var connectionId: String?
    /// How the link is carried while connected: `WebSockets`, `ServerSentEvents` or `LongPolling`, and `json` or
    /// `messagepack`.
    public var transport: String?
    public var hubProtocol: String?
    public var since: Date
    public var detail: String
    /// The daemon's process id: a `status` that finds it gone says "not running" whatever the row says.
    public var pid: Int32

    public init(
        state: State, connectionId: String? = nil, since: Date = Date(), detail: String = "", pid: Int32 = getpid()
    ) {
        self.state = state
        self.connectionId = connectionId
        self.since = since
        self.detail = detail
        self.pid = pid
    }

    public var json: JSONValue {
        [
            "state": .string(state.rawValue), "connectionId": connectionId.map { .string($0) } ?? .null,
            "since": .string(ISODate.string(since)), "detail": .string(detail), "pid": .number(String(pid)),
            "transport": transport.map { .string($0) } ?? .null, "protocol": hubProtocol.map { .string($0) } ?? .null,
        ]
    }

    public init?(json: JSONValue) {
        guard let s = json["state"]?.stringValue.flatMap(State.init(rawValue:)),
            let since = json["since"]?.stringValue.flatMap(ISODate.parse),
            let pid = json["pid"]?.intValue.flatMap({ Int32(exactly: $0) })
        else { return nil }
        self.init(
            state: s, connectionId: json["connectionId"]?.stringValue, since: since,
            detail: json["detail"]?.stringValue ?? "", pid: pid)
        transport = json["transport"]?.stringValue
        hubProtocol = json["protocol"]?.stringValue
    }
}
