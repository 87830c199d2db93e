import CPostgres
import Core
import Foundation
import Synchronization

/// One session with a PostgreSQL server, on libpq: statements with parameters (never spliced into the text),
/// LISTEN/NOTIFY, and the session itself (advisory locks live as long as it does). Calls block the calling thread
/// until the server answers, and one call runs at a time; a connection that waits for notifications should do
/// nothing else. Knows nothing of the relay.
public final class PostgresConnection: Sendable {
    public let location: PostgresLocation
    /// libpq's `PGconn`, nil once closed. libpq connections are not for two threads at once: the mutex sees to it.
    private let connection: Mutex<Session>

    /// The `PGconn` pointer, only ever touched under the mutex.
    private struct Session: @unchecked Sendable {
        var conn: OpaquePointer?
        /// The statements with parameters this session prepared, by their text, and the name of each: the server
        /// parses and plans each once, not at every call (a third of PostgreSQL's CPU per webhook, BENCHMARKS.md
        /// session 39). Nil once the server lost one it had (a pooler that hands the session's statements to
        /// other server connections): plain statements from then on.
        var prepared: [String: String]? = [:]
        /// The names given so far (not `prepared.count`: a name dropped from the map stays on the server, unused).
        var named = 0

        /// The `PGconn` of a session not closed yet.
        func open(_ location: PostgresLocation) throws(PostgresError) -> OpaquePointer {
            guard let conn else { throw PostgresError(.lost, "the connection to \(location) is closed") }
            return conn
        }
    }

    /// At most this many statements are prepared per session (the relay's own are fewer; text built with values in
    /// it would otherwise grow the server's memory and this map without end): past it, plain statements.
    static let preparedLimit = 256

    /// How soon a peer that vanished (a machine off, a cable out: no FIN, no RST) is given up, on both sides: TCP
    /// keep-alives while idle, and a limit on unacknowledged data while a statement waits (`tcp_user_timeout`),
    /// which a keep-alive alone does not cover. The server's side matters as much: it ends a vanished replica's
    /// sessions, and with them the advisory locks that say the replica is up or holds the link (the server's own
    /// default is two hours).
    public enum DeadPeer: Sendable {
        /// About 11 s idle, 10 s in a statement: for the work a replica does.
        case standard
        /// About 3 s either way: for a session whose loss must be known before another replica's 5 s are up.
        case lease

        /// The server's keep-alives for this session, as start-up options.
        var serverOptions: String {
            switch self {
            case .standard: "-c tcp_keepalives_idle=5 -c tcp_keepalives_interval=2 -c tcp_keepalives_count=3"
            case .lease: "-c tcp_keepalives_idle=1 -c tcp_keepalives_interval=1 -c tcp_keepalives_count=2"
            }
        }

        var settings: [(String, String)] {
            switch self {
            case .standard:
                [
                    ("keepalives_idle", "5"), ("keepalives_interval", "2"), ("keepalives_count", "3"),
                    ("tcp_user_timeout", "10000"),
                ]
            case .lease:
                [
                    ("keepalives_idle", "1"), ("keepalives_interval", "1"), ("keepalives_count", "2"),
                    ("tcp_user_timeout", "3000"),
                ]
            }
        }
    }

    /// Connects, or says why not. `password`: from `store.password_file` or the environment; nil leaves it to libpq
    /// (a `~/.pgpass` file, or a server that asks none).
    public init(
        _ location: PostgresLocation, password: String? = nil, applicationName: String = "allowance-relay",
        connectTimeout: Int = 5, deadPeer: DeadPeer = .standard
    ) throws(PostgresError) {
        self.location = location
        var settings: [(String, String)] =
            [
                ("host", location.host), ("port", String(location.port)), ("user", location.user),
                ("dbname", location.database),
                ("application_name", applicationName), ("connect_timeout", String(max(2, connectTimeout))),
                ("keepalives", "1"),
                // libpq prints a server's notices ("relation ... already exists, skipping") to stderr, in the middle of a
                // command's output: only warnings and worse are sent.
                ("options", "-c client_min_messages=warning " + deadPeer.serverOptions),
            ] + deadPeer.settings
        if let mode = location.sslMode { settings.append(("sslmode", mode)) }
        if let cert = location.sslRootCert { settings.append(("sslrootcert", cert)) }
        if let password { settings.append(("password", password)) }
        let keys = settings.map { strdup($0.0) } + [nil]
        let values = settings.map { strdup($0.1) } + [nil]
        defer {
            keys.forEach { free($0) }
            // The password's copy is wiped before it is freed.
            for value in values {
                if let value { memset(value, 0, strlen(value)) }
                free(value)
            }
        }
        let conn = keys.map { UnsafePointer($0) }.withUnsafeBufferPointer { k in
            values.map { UnsafePointer($0) }.withUnsafeBufferPointer { v in
                PQconnectdbParams(k.baseAddress, v.baseAddress, 0)
            }
        }
        guard let conn, PQstatus(conn) == CONNECTION_OK else {
            let why = conn.map { Self.errorText($0) } ?? "out of memory"
            PQfinish(conn)
            throw PostgresError(.connect, "cannot connect to \(location): \(why)")
        }
        connection = Mutex(Session(conn: conn))
    }

    deinit { close() }

    /// Ends the session (and with it the advisory locks it held). Safe to call more than once.
    public func close() {
        connection.withLock { session in
            PQfinish(session.conn)
            session.conn = nil
        }
    }

    /// Runs one statement (several, separated by `;`, when there are no parameters) and returns its rows as text.
    /// `$1`, `$2`, ... in `sql` take `parameters` in order; nil is SQL NULL.
    @discardableResult
    public func query(_ sql: String, _ parameters: [String?] = []) throws(PostgresError) -> PostgresRows {
        try connection.withLock { session throws(PostgresError) -> PostgresRows in
            let conn = try session.open(location)
            if parameters.isEmpty {
                let result = PQexec(conn, sql)
                defer { PQclear(result) }
                return try Self.rows(of: result, conn: conn, location: location)
            }
            return try Self.withValues(parameters) { values throws(PostgresError) -> PostgresRows in
                let count = Int32(parameters.count)
                func plainly() throws(PostgresError) -> PostgresRows {
                    let result = PQexecParams(conn, sql, count, nil, values, nil, nil, 0)
                    defer { PQclear(result) }
                    return try Self.rows(of: result, conn: conn, location: location)
                }
                guard let name = try Self.prepare(sql, count, &session, location) else { return try plainly() }
                let result = PQexecPrepared(conn, name, count, values, nil, nil, 0)
                defer { PQclear(result) }
                do throws(PostgresError) {
                    return try Self.rows(of: result, conn: conn, location: location)
                } catch {
                    switch error.sqlState {
                    case "26000":  // the server does not have it (a pooler moved the session): prepare no more
                        session.prepared = nil
                    case "0A000":  // "cached plan must not change result type": a table changed under it
                        session.prepared?[sql] = nil
                    default:
                        throw error
                    }
                    // Outside a transaction nothing was lost: run it again, plainly. Inside one, the transaction
                    // is spoilt and the caller's retry will find the statement unprepared.
                    guard PQtransactionStatus(conn) == PQTRANS_IDLE else { throw error }
                    return try plainly()
                }
            }
        }
    }

    /// The name `sql` is prepared under in this session, prepared now on its first use; nil: run it plainly (the
    /// session prepares no more). A statement the server refuses to prepare throws its error, as running it would.
    private static func prepare(
        _ sql: String, _ count: Int32, _ session: inout Session, _ location: PostgresLocation
    ) throws(PostgresError) -> String? {
        guard let conn = session.conn, let prepared = session.prepared else { return nil }
        if let name = prepared[sql] { return name }
        guard prepared.count < preparedLimit else { return nil }
        session.named += 1
        let name = "allowance_relay_\(session.named)"
        let result = PQprepare(conn, name, sql, count, nil)
        defer { PQclear(result) }
        do throws(PostgresError) {
            _ = try rows(of: result, conn: conn, location: location)
        } catch {
            // Taken already: another client's statements share this server connection (a pooler).
            guard error.sqlState == "42P05" else { throw error }
            session.prepared = nil
            guard PQtransactionStatus(conn) == PQTRANS_IDLE else { throw error }
            return nil
        }
        session.prepared?[sql] = name
        return name
    }

    /// Runs `body` in a transaction: committed when it returns, rolled back when it throws.
    public func transaction<T>(_ body: () throws(PostgresError) -> T) throws(PostgresError) -> T {
        try query("BEGIN")
        do {
            let value = try body()
            try query("COMMIT")
            return value
        } catch {
            _ = try? query("ROLLBACK")
            throw error
        }
    }

    /// Subscribes this session to `channel` (`NOTIFY channel` from any session then reaches `notifications`).
    public func listen(_ channel: String) throws(PostgresError) {
        try query("LISTEN \(Self.identifier(channel))")
    }

    /// Sends a notification on `channel` (delivered when the surrounding transaction commits, if there is one).
    public func notify(_ channel: String, payload: String = "") throws(PostgresError) {
        try query("SELECT pg_notify($1, $2)", [channel, payload])
    }

    /// The notifications that arrived, waiting up to `timeout` (nil: as long as it takes) for the first one, or
    /// until `wake` is signalled. Empty after the timeout or the wake.
    public func notifications(
        timeout: Duration?, wake: PollWake? = nil
    ) throws(PostgresError) -> [PostgresNotification] {
        let deadline = timeout.map { ContinuousClock.now + $0 }
        while true {
            let (found, socket) = try connection.withLock {
                session throws(PostgresError) -> ([PostgresNotification], Int32) in
                let conn = try session.open(location)
                try Self.consumeInput(conn, location)
                var found: [PostgresNotification] = []
                while let note = PQnotifies(conn) {
                    found.append(
                        PostgresNotification(
                            channel: String(cString: note.pointee.relname),
                            payload: String(cString: note.pointee.extra),
                            senderPID: note.pointee.be_pid))
                    PQfreemem(note)
                }
                return (found, PQsocket(conn))
            }
            let left = deadline.map { ContinuousClock.now.duration(to: $0) }
            if !found.isEmpty || left.map({ $0 <= .zero }) == true { return found }
            var fds = [pollfd(fd: socket, events: Int16(POLLIN), revents: 0)]
            if let wake { fds.append(pollfd(fd: wake.fd, events: Int16(POLLIN), revents: 0)) }
            let ms = left.map { Int32(min(Double(Int32.max), ($0.inSeconds * 1000).rounded(.up))) }
            _ = poll(&fds, nfds_t(fds.count), ms ?? -1)
            if let wake, fds[1].revents != 0 {
                wake.drain()
                return []
            }
        }
    }

    /// Runs one statement that may wait in the server (a lock it queues for) until its answer, or until `wake` is
    /// signalled: the server is then asked to cancel it, and nil is returned unless it had finished meanwhile. The
    /// session sleeps in `poll` on its socket and the wake's, with no timer. `$1`, `$2`, ... take `parameters`.
    public func query(
        _ sql: String, _ parameters: [String?], until wake: PollWake
    ) throws(PostgresError) -> PostgresRows? {
        let socket = try connection.withLock { session throws(PostgresError) -> Int32 in
            let conn = try session.open(location)
            let sent = Self.withValues(parameters) {
                PQsendQueryParams(conn, sql, Int32(parameters.count), nil, $0, nil, nil, 0)
            }
            guard sent == 1 else {
                throw PostgresError(
                    PQstatus(conn) == CONNECTION_OK ? .statement : .lost,
                    "PostgreSQL at \(location): \(Self.errorText(conn))")
            }
            return PQsocket(conn)
        }
        var cancelled = false
        while try connection.withLock({ session throws(PostgresError) -> Bool in
            let conn = try session.open(location)
            try Self.consumeInput(conn, location)
            return PQisBusy(conn) == 1
        }) {
            var fds = [pollfd(fd: socket, events: Int16(POLLIN), revents: 0)]
            if !cancelled { fds.append(pollfd(fd: wake.fd, events: Int16(POLLIN), revents: 0)) }
            // Once cancelled, the answer (the cancel's error, or the result it came too late for) is due at once; a
            // server that sends neither within the dead-peer limits is given up.
            let answered = poll(&fds, nfds_t(fds.count), cancelled ? 10_000 : -1)
            if cancelled && answered == 0 {
                throw PostgresError(.lost, "PostgreSQL at \(location) did not answer a cancelled statement")
            }
            if !cancelled, fds[1].revents != 0 {
                wake.drain()
                cancelled = true
                connection.withLock { session in
                    guard let conn = session.conn, let cancel = PQgetCancel(conn) else { return }
                    defer { PQfreeCancel(cancel) }
                    var reason = [CChar](repeating: 0, count: 256)
                    _ = PQcancel(cancel, &reason, Int32(reason.count))
                }
            }
        }
        return try connection.withLock { session throws(PostgresError) -> PostgresRows? in
            let conn = try session.open(location)
            var answer: Result<PostgresRows, PostgresError>?
            while let result = PQgetResult(conn) {
                defer { PQclear(result) }
                if answer == nil {
                    answer = Result { () throws(PostgresError) in
                        try Self.rows(of: result, conn: conn, location: location)
                    }
                }
            }
            switch answer {
            case .success(let rows): return rows
            case .failure(let error) where cancelled && error.sqlState == "57014": return nil  // query_canceled
            case .failure(let error): throw error
            case nil: throw PostgresError(.lost, "PostgreSQL at \(location): \(Self.errorText(conn))")
            }
        }
    }

    /// Asks the server not to end this session for being idle (`idle_session_timeout`, PostgreSQL 14 and later): for
    /// a session that waits without a statement (a listener, a lock's holder).
    public func keepWhileIdle() throws(PostgresError) {
        guard connection.withLock({ $0.conn.map { PQserverVersion($0) } ?? 0 }) >= 140_000 else { return }
        try query("SET idle_session_timeout = 0")
    }

    /// Whether the session still answers (a round trip).
    public var isAlive: Bool { (try? query("SELECT 1")) != nil }

    /// The server process serving this session (what `pg_stat_activity` and `pg_locks` call `pid`).
    public func backendPID() -> Int32? {
        connection.withLock { session in session.conn.map { PQbackendPID($0) } }
    }

    /// `name` quoted as an SQL identifier (for LISTEN, which takes no parameter).
    public static func identifier(_ name: String) -> String {
        "\"" + name.replacingOccurrences(of: "\"", with: "\"\"") + "\""
    }

    /// Reads what the server sent (notifications, a statement's answer): a session the server ended throws.
    private static func consumeInput(_ conn: OpaquePointer, _ location: PostgresLocation) throws(PostgresError) {
        guard PQconsumeInput(conn) == 1, PQstatus(conn) == CONNECTION_OK else {
            throw PostgresError(.lost, "lost the connection to \(location): \(errorText(conn))")
        }
    }

    /// `parameters` as the C strings libpq takes (nil: SQL NULL), for the length of `body`.
    private static func withValues<T, E: Error>(
        _ parameters: [String?], _ body: (UnsafePointer<UnsafePointer<CChar>?>?) throws(E) -> T
    ) throws(E) -> T {
        let copies = parameters.map { $0.map { strdup($0) } ?? nil }
        defer { copies.forEach { free($0) } }
        return try copies.map { UnsafePointer($0) }.withUnsafeBufferPointer { (values) throws(E) -> T in
            try body(values.baseAddress)
        }
    }

    private static func errorText(_ conn: OpaquePointer) -> String {
        String(cString: PQerrorMessage(conn)).trimmingCharacters(in: .whitespacesAndNewlines)
            .replacingOccurrences(of: "\n", with: "; ").replacingOccurrences(of: "\t", with: "")
    }

    private static func rows(
        of result: OpaquePointer?, conn: OpaquePointer, location: PostgresLocation
    ) throws(PostgresError) -> PostgresRows {
        guard let result else {
            throw PostgresError(
                PQstatus(conn) == CONNECTION_OK ? .statement : .lost, "PostgreSQL at \(location): \(errorText(conn))")
        }
        switch PQresultStatus(result) {
        case PGRES_TUPLES_OK, PGRES_COMMAND_OK, PGRES_EMPTY_QUERY:
            break
        default:
            let state = PQresultErrorField(result, Int32(UInt8(ascii: "C"))).map { String(cString: $0) }
            let message = String(cString: PQresultErrorMessage(result)).trimmingCharacters(in: .whitespacesAndNewlines)
                .replacingOccurrences(of: "\n", with: "; ").replacingOccurrences(of: "\t", with: "")
            if PQstatus(conn) != CONNECTION_OK {
                throw PostgresError(
                    .lost, "lost the connection to \(location): \(message.isEmpty ? errorText(conn) : message)")
            }
            throw PostgresError(.statement, message, sqlState: state)
        }
        let columns = (0..<PQnfields(result)).map { String(cString: PQfname(result, $0)) }
        let rows = (0..<PQntuples(result)).map { row in
            (0..<Int32(columns.count)).map { column -> String? in
                PQgetisnull(result, row, column) == 1 ? nil : String(cString: PQgetvalue(result, row, column))
            }
        }
        let affected = Int(String(cString: PQcmdTuples(result))) ?? 0
        return PostgresRows(columns: columns, rows: rows, affected: affected)
    }
}

/// A statement's answer: its rows as text (PostgreSQL's text format), and how many rows a change touched.
public struct PostgresRows: Sendable, Equatable {
    public let columns: [String]
    public let rows: [[String?]]
    public let affected: Int

    /// The value of `column` in row `row` (nil for NULL or no such column).
    public subscript(row: Int, column: String) -> String? {
        guard row < rows.count, let index = columns.firstIndex(of: column) else { return nil }
        return rows[row][index]
    }

    /// The first column of the first row: for `SELECT count(*)` and the like.
    public var scalar: String? { rows.first?.first ?? nil }
}

/// A `NOTIFY` that reached a listening session.
public struct PostgresNotification: Sendable, Equatable {
    public let channel: String
    public let payload: String
    public let senderPID: Int32
}
