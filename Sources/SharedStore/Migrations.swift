import PostgresTransport

/// A step of a PostgreSQL schema, applied once, in order (`relay_schema_migrations` records which ran).
public struct PostgresMigration: Sendable {
    public let version: Int
    public let name: String
    public let sql: String

    public init(_ version: Int, _ name: String, _ sql: String) {
        self.version = version
        self.name = name
        self.sql = sql
    }
}

public enum PostgresMigrator {
    /// Applies the migrations not applied yet, each in the transaction that records it. Replicas that start
    /// together wait for each other on a transaction-scoped advisory lock, so each step runs exactly once.
    /// Returns the versions this call applied.
    @discardableResult
    public static func migrate(
        _ db: PostgresConnection, _ migrations: [PostgresMigration]
    ) throws(PostgresError) -> [Int] {
        // Under the lock too: two sessions running CREATE TABLE IF NOT EXISTS at once can both find no table and
        // one fails on the catalog's unique index (seen when three replicas started together).
        try db.transaction { () throws(PostgresError) in
            try db.query("SELECT pg_advisory_xact_lock($1)", [String(AdvisoryKey.migrations)])
            try db.query(
                """
                CREATE TABLE IF NOT EXISTS relay_schema_migrations (
                    version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())
                """)
        }
        var applied: [Int] = []
        for migration in migrations.sorted(by: { $0.version < $1.version }) {
            let ran = try db.transaction { () throws(PostgresError) -> Bool in
                try db.query("SELECT pg_advisory_xact_lock($1)", [String(AdvisoryKey.migrations)])
                let done = try db.query(
                    "SELECT 1 FROM relay_schema_migrations WHERE version = $1", [String(migration.version)])
                guard done.rows.isEmpty else { return false }
                try db.query(migration.sql)
                try db.query(
                    "INSERT INTO relay_schema_migrations (version, name) VALUES ($1, $2)",
                    [String(migration.version), migration.name])
                return true
            }
            if ran { applied.append(migration.version) }
        }
        return applied
    }

    /// The versions applied so far, in order.
    public static func applied(_ db: PostgresConnection) throws(PostgresError) -> [Int] {
        try db.query("SELECT version FROM relay_schema_migrations ORDER BY version").rows.compactMap {
            $0.first.flatMap { $0 }.flatMap { Int($0) }
        }
    }
}

/// The advisory lock keys of the relay: 64-bit, made from a name, so that relays of different families sharing one
/// database (one per hub URL) hold different leases, and other programs' keys are unlikely to collide.
public enum AdvisoryKey {
    public static let migrations = key("allowance-relay:migrations")

    /// In `pg_locks`, an advisory lock taken on a bigint key (shown as its high and low 32 bits, `classid` and
    /// `objid`, with `objsubid` 1) and granted; `lockedKey` is that key.
    static let granted = "locktype = 'advisory' AND granted AND objsubid = 1"
    static let lockedKey = "((classid::bigint << 32) | objid::bigint)"

    /// FNV-1a of the name, as a signed 64-bit integer (what `pg_advisory_lock(bigint)` takes).
    public static func key(_ name: String) -> Int64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in name.utf8 {
            hash ^= UInt64(byte)
            hash = hash &* 0x0000_0100_0000_01b3
        }
        return Int64(bitPattern: hash)
    }
}
