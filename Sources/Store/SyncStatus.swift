import AllowanceAPI
import Foundation
import GRDB
import SignalRProtocol

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
        try write { db in
            try db.execute(
                sql: "INSERT INTO sync_state (key, value) VALUES ('status', ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                arguments: [status.json.serialized])
        }
    }

    public func syncStatus() throws(StoreError) -> SyncStatus? {
        try read { db in
            try String.fetchOne(db, sql: "SELECT value FROM sync_state WHERE key = 'status'")
                .flatMap { try? JSONValue(parsing: Array($0.utf8)) }
                .flatMap(SyncStatus.init(json:))
        }
    }
}
