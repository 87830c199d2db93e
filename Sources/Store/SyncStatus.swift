import AllowanceAPI
import Foundation
import GRDB
import Core
import StoreContract

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
            "phase": .string(phase.rawValue), "detail": .string(detail), "since": .string(ISO.string(since)),
            "nextRetry": nextRetry.map { .string(ISO.string($0)) } ?? .null,
        ]
    }

    init?(json: JSONValue) {
        guard let p = json["phase"]?.stringValue.flatMap(Phase.init(rawValue:)), let since = json["since"]?.stringValue.flatMap(ISODate.parse)
        else { return nil }
        self.init(phase: p, detail: json["detail"]?.stringValue ?? "", since: since, nextRetry: json["nextRetry"]?.stringValue.flatMap(ISODate.parse))
    }
}

extension Store {
    public func setSyncStatus(_ status: SyncStatus) throws(StoreError) {
        try setState("status", status.json)
    }

    public func syncStatus() throws(StoreError) -> SyncStatus? {
        try state("status").flatMap(SyncStatus.init(json:))
    }

    /// A JSON value under `key` in sync_state: what the daemon records for `status` (another process) to read.
    func setState(_ key: String, _ value: JSONValue) throws(StoreError) {
        try write { db in
            try db.execute(
                sql: "INSERT INTO sync_state (key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                arguments: [key, value.serialized])
        }
    }

    func state(_ key: String) throws(StoreError) -> JSONValue? {
        try read { db in
            try String.fetchOne(db, sql: "SELECT value FROM sync_state WHERE key = ?", arguments: [key])
                .flatMap { try? JSONValue(parsing: Array($0.utf8)) }
        }
    }
}

/// The running daemon's hub link, persisted on each change so that `status` (another process) can show it.
public struct LinkStatus: Sendable, Equatable {
    public enum State: String, Sendable {
        case connecting, connected, reconnecting, stopped
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

    public init(state: State, connectionId: String? = nil, since: Date = Date(), detail: String = "", pid: Int32 = getpid()) {
        self.state = state
        self.connectionId = connectionId
        self.since = since
        self.detail = detail
        self.pid = pid
    }

    public var json: JSONValue {
        [
            "state": .string(state.rawValue), "connectionId": connectionId.map { .string($0) } ?? .null,
            "since": .string(ISO.string(since)), "detail": .string(detail), "pid": .number(String(pid)),
            "transport": transport.map { .string($0) } ?? .null, "protocol": hubProtocol.map { .string($0) } ?? .null,
        ]
    }

    init?(json: JSONValue) {
        guard let s = json["state"]?.stringValue.flatMap(State.init(rawValue:)), let since = json["since"]?.stringValue.flatMap(ISODate.parse),
            let pid = json["pid"]?.intValue.flatMap({ Int32(exactly: $0) })
        else { return nil }
        self.init(state: s, connectionId: json["connectionId"]?.stringValue, since: since, detail: json["detail"]?.stringValue ?? "", pid: pid)
        transport = json["transport"]?.stringValue
        hubProtocol = json["protocol"]?.stringValue
    }
}

extension Store {
    public func setLinkStatus(_ status: LinkStatus) throws(StoreError) {
        try setState("link", status.json)
    }

    public func linkStatus() throws(StoreError) -> LinkStatus? {
        try state("link").flatMap(LinkStatus.init(json:))
    }
}
