import Core
import Foundation
import PostgresTransport

/// The relays sharing one database, as `status` shows them: whether (and since when) each holds the hub link, and
/// whether it is up. A replica is up while its presence lock is held: an advisory lock its listening session takes
/// (`holdPresence`), which the server lets go of when that session ends (the replica stopped, killed, or its machine
/// down), so a replica at rest writes nothing to say it lives. A replica of an older release, which writes a
/// heartbeat every second instead, is up while its heartbeat is newer than `staleAfter`. A row stays until another
/// replica starts under the same name.
public struct ReplicaRegistry: Sendable {
    public struct Replica: Sendable, Equatable {
        public let name: String
        public let host: String
        public let pid: Int32
        public let startedAt: String
        /// Now for a replica that is up; when it was last seen for one that is gone.
        public let seenAt: String
        /// When it took the hub link; nil when it does not hold it.
        public let linkHeldSince: String?
        public let alive: Bool
        /// Holds the hub link now: of the replicas that said so in a heartbeat that is not stale, the one that took
        /// it last (a killed holder's last heartbeat still says so until it is stale; its successor took it after).
        public let holdsLink: Bool
    }

    public static let migration = PostgresMigration(
        1, "replicas",
        """
        CREATE TABLE relay_replicas (
            replica text PRIMARY KEY, host text NOT NULL, pid integer NOT NULL,
            started_at timestamptz NOT NULL DEFAULT now(), seen_at timestamptz NOT NULL DEFAULT now(),
            link_held_since timestamptz)
        """)

    public let db: PostgresConnection
    public let staleAfter: Duration

    public init(_ db: PostgresConnection, staleAfter: Duration = .seconds(3)) {
        self.db = db
        self.staleAfter = staleAfter
    }

    /// This replica is up (its start): a row of its own, replacing one an earlier run of the same name left.
    public func register(_ name: String, host: String, pid: Int32 = getpid()) throws(PostgresError) {
        try db.query(
            """
            INSERT INTO relay_replicas (replica, host, pid) VALUES ($1, $2, $3)
            ON CONFLICT (replica) DO UPDATE SET host = EXCLUDED.host, pid = EXCLUDED.pid, started_at = now(),
              seen_at = now(), link_held_since = NULL
            """, [name, host, String(pid)])
    }

    /// The advisory lock that says `name` is up, as long as the session holding it lives.
    public static func presenceKey(_ name: String) -> Int64 { AdvisoryKey.key("allowance-relay:replica:\(name)") }

    /// Takes `name`'s presence lock on this session: the replica is up while the session lives. False when another
    /// session holds it (another relay runs under the same name).
    public func holdPresence(_ name: String) throws(PostgresError) -> Bool {
        try db.query("SELECT pg_try_advisory_lock($1)", [String(Self.presenceKey(name))]).scalar == "t"
    }

    /// The advisory keys some session holds now.
    private func heldKeys() throws(PostgresError) -> Set<Int64> {
        Set(
            try db.query("SELECT \(AdvisoryKey.lockedKey)::text FROM pg_locks WHERE \(AdvisoryKey.granted)").rows
                .compactMap { $0[0].flatMap { Int64($0) } })
    }

    /// Whether this replica holds the hub link or not (the time it took it is kept while it does), and when it was
    /// last seen.
    public func heartbeat(_ name: String, holdsLink: Bool) throws(PostgresError) {
        try db.query(
            """
            UPDATE relay_replicas SET seen_at = now(),
              link_held_since = CASE WHEN $2 THEN coalesce(link_held_since, now()) ELSE NULL END
            WHERE replica = $1
            """, [name, holdsLink ? "true" : "false"])
    }

    /// Every replica, the link holder first, then by name.
    public func replicas() throws(PostgresError) -> [Replica] {
        let rows = try db.query(
            """
            SELECT replica, host, pid, to_char(started_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'),
              to_char(seen_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'),
              to_char(link_held_since AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
              seen_at > now() - make_interval(secs => $1::float8), to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"')
            FROM relay_replicas ORDER BY link_held_since IS NULL, replica
            """, [String(staleAfter.inSeconds)]
        ).rows
        let present = try heldKeys()
        let up = rows.map { present.contains(Self.presenceKey($0[0] ?? "")) || $0[6] == "t" }
        let holder = zip(rows, up).filter { $1 && $0[5] != nil }.map(\.0).max {
            ($0[5] ?? "", $0[0] ?? "") < ($1[5] ?? "", $1[0] ?? "")
        }?[0]
        return zip(rows, up).map { row, up in
            Replica(
                name: row[0] ?? "", host: row[1] ?? "", pid: Int32(row[2] ?? "") ?? 0, startedAt: row[3] ?? "",
                seenAt: (up ? row[7] : row[4]) ?? "",
                linkHeldSince: row[5], alive: up, holdsLink: row[0] == holder)
        }.sorted { ($0.holdsLink ? 0 : 1, $0.name) < ($1.holdsLink ? 0 : 1, $1.name) }
    }
}
