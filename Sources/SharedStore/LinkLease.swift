import Core
import PostgresTransport
import StoreContract
import Synchronization

/// Work that one replica at a time may do (the hub link and its catch-up), held as a PostgreSQL advisory lock on a
/// session of its own. The server lets go of the lock when that session ends: at a clean release, and as well when
/// the holder dies (`kill -9`: its socket closes and the server ends the session at once) or its machine vanishes
/// (TCP keep-alives end the session within seconds). So the lease needs no expiry of its own to be taken over.
public final class LinkLease: WatchedLease {
    public let name: String
    public let key: Int64
    private let location: PostgresLocation
    private let password: String?
    private let session: Mutex<PostgresConnection?>

    public init(_ name: String, location: PostgresLocation, password: String?) {
        self.name = name
        self.key = AdvisoryKey.key("allowance-relay:link:\(name)")
        self.location = location
        self.password = password
        self.session = Mutex(nil)
    }

    /// One try: true when this replica holds the lease now (it may have held it already). A session that was lost
    /// is replaced; a server that cannot be reached throws.
    public func tryAcquire() throws(PostgresError) -> Bool {
        let db = try connection()
        do {
            if try heldBy(db) { return true }
            return try db.query("SELECT pg_try_advisory_lock($1)", [String(key)]).scalar == "t"
        } catch {
            dropSession()
            throw error
        }
    }

    /// Waits in the server's queue for the lock (`pg_advisory_lock`): granted the moment its holder lets go or its
    /// session ends, with nothing asked meanwhile. The wake cancels the wait.
    public func acquire(until wake: PollWake) throws(PostgresError) -> Bool {
        let db = try connection()
        do {
            if try heldBy(db) { return true }
            return try db.query("SELECT pg_advisory_lock($1)", [String(key)], until: wake) != nil
        } catch {
            dropSession()
            throw error
        }
    }

    /// The lock lasts as long as its session, so the session's socket is watched, not asked: it becomes readable
    /// when the server ends the session (a restart, `pg_terminate_backend`), and fails when the server's machine
    /// vanished (the session's TCP keep-alives, about 3 s).
    public func watch(until wake: PollWake) {
        guard let db = session.withLock({ $0 }) else { return }
        do {
            // Nothing listens on this session: an answer is either the wake (empty) or the session's end (thrown).
            while try !db.notifications(timeout: nil, wake: wake).isEmpty {}
        } catch {
            dropSession()
        }
    }

    /// Whether the lease is still ours: the session answers and the server still has our lock (false once the
    /// server restarted, the session was cut, or it was never acquired).
    public var isHeld: Bool {
        guard let db = session.withLock({ $0 }) else { return false }
        guard let held = try? heldBy(db) else {
            dropSession()
            return false
        }
        return held
    }

    /// Lets go at once: the lock is unlocked on the session before it is closed, because the server ends a closed
    /// session a moment later, and until then another replica would still find the lease taken. Safe to call when
    /// not held.
    public func release() {
        if let db = session.withLock({ $0 }) { _ = try? db.query("SELECT pg_advisory_unlock_all()") }
        dropSession()
    }

    private func heldBy(_ db: PostgresConnection) throws(PostgresError) -> Bool {
        try db.query(
            "SELECT count(*) FROM pg_locks WHERE \(AdvisoryKey.granted) AND pid = pg_backend_pid() AND \(AdvisoryKey.lockedKey) = $1::bigint",
            [String(key)]
        ).scalar == "1"
    }

    private func connection() throws(PostgresError) -> PostgresConnection {
        if let db = session.withLock({ $0 }) { return db }
        let db = try PostgresConnection(
            location, password: password, applicationName: "allowance-relay link lease", deadPeer: .lease)
        // The server's keep-alives (`deadPeer: .lease`) end the session of a holder whose machine vanished in about
        // 3 s (configured, not measured), before the next holder's 5 s are up; one killed in the middle of a
        // statement is noticed within 1 s rather than at the statement's end. A standby's statement waits for the
        // lock as long as it takes, whatever the role's timeouts say; the holder's session is idle while it holds it.
        try db.query("SET client_connection_check_interval = '1s'; SET statement_timeout = 0; SET lock_timeout = 0")
        try db.keepWhileIdle()
        session.withLock { $0 = db }
        return db
    }

    private func dropSession() {
        let db = session.withLock { s -> PostgresConnection? in
            defer { s = nil }
            return s
        }
        db?.close()
    }
}
