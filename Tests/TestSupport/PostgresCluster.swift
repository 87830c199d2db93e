import Core
import Foundation

/// A real PostgreSQL server (Debian's `postgresql`) of the test's own: `initdb` into a temporary folder, `postgres`
/// on a loopback port, stopped (or killed) by the test. Password authentication over TCP (scram-sha-256), as a
/// home server would have it; `superuser` and `password` sign in. PostgreSQL refuses to run as root: as root
/// (CI), the cluster belongs to Debian's `postgres` user, and its programs run as that user through `setpriv`.
public final class PostgresCluster: @unchecked Sendable {
    public let port: Int
    public let dir: URL
    public let superuser = "relay_admin"
    public let password = "pg-test-\(UUID().uuidString.prefix(8))"
    private var pid: pid_t?

    /// Debian's server programs (`/usr/lib/postgresql/VERSION/bin`), the newest there is.
    public static var binDir: String? {
        let root = "/usr/lib/postgresql"
        let versions = (try? FileManager.default.contentsOfDirectory(atPath: root)) ?? []
        let newest = versions.compactMap { Int($0) }.sorted().last
        guard let newest, FileManager.default.isExecutableFile(atPath: "\(root)/\(newest)/bin/initdb") else {
            return nil
        }
        return "\(root)/\(newest)/bin"
    }

    /// `initdb` and a started server; the waits are off the cooperative pool (see `offThread`).
    public init() async throws {
        guard let bin = Self.binDir else {
            throw HarnessError("PostgreSQL is not installed (apt-get install postgresql)")
        }
        port = try freeLoopbackPortOutsideEphemeralRange()
        dir = FileManager.default.temporaryDirectory.appending(path: "pg-\(UUID())")
        try await offThread(named: "test-harness") { [dir, port, superuser, password, data] in
            try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
            let passwordFile = dir.appending(path: "pwfile").path
            try password.write(toFile: passwordFile, atomically: true, encoding: .utf8)
            if getuid() == 0 { _ = try runCommandBlocking(["chown", "-R", "postgres:postgres", dir.path]) }
            _ = try runCommandBlocking(
                Self.asOwner + [
                    "\(bin)/initdb", "-D", data, "-U", superuser, "--pwfile=\(passwordFile)",
                    "--auth-host=scram-sha-256",
                    "--auth-local=trust", "--no-sync", "-E", "UTF8", "--locale=C",
                ])
            // Enough sessions for several replicas and their tests side by side; no fsync (a test cluster, not data).
            try """
            listen_addresses = '127.0.0.1'
            port = \(port)
            unix_socket_directories = '\(dir.path)'
            max_connections = 100
            fsync = off
            synchronous_commit = off
            full_page_writes = off
            logging_collector = off

            """.write(toFile: "\(data)/postgresql.auto.conf", atomically: true, encoding: .utf8)
            if getuid() == 0 {
                _ = try runCommandBlocking(["chown", "postgres:postgres", "\(data)/postgresql.auto.conf"])
            }
        }
        try await start()
    }

    deinit {
        stop()
        try? FileManager.default.removeItem(at: dir)
    }

    /// `postgres://relay_admin@127.0.0.1:PORT/DATABASE`.
    public func url(database: String = "postgres", query: String = "") -> String {
        "postgres://\(superuser)@127.0.0.1:\(port)/\(database)\(query.isEmpty ? "" : "?\(query)")"
    }

    /// A fresh database for one test, so that tests sharing a cluster share no rows.
    public func createDatabase() async throws -> String {
        let name = "t_\(UUID().uuidString.prefix(12).lowercased().replacingOccurrences(of: "-", with: ""))"
        _ = try await psql("CREATE DATABASE \(name)")
        return name
    }

    /// Runs `sql` with `psql` over the cluster's Unix socket (trusted: no password).
    @discardableResult
    public func psql(_ sql: String, database: String = "postgres") async throws -> String {
        try await runCommand(psqlCommand(["-c", sql], database: database))
    }

    /// The command line of `psql` with `arguments` (for a test that needs a client process of its own to kill).
    public func psqlCommand(_ arguments: [String], database: String = "postgres") throws -> [String] {
        guard let bin = Self.binDir else { throw HarnessError("PostgreSQL is not installed") }
        return Self.asOwner + [
            "\(bin)/psql", "-X", "-q", "-At", "-h", dir.path, "-p", String(port), "-U", superuser, "-d", database,
        ] + arguments
    }

    /// Starts the server and waits (up to 20 s) until it accepts connections.
    public func start() async throws {
        guard let bin = Self.binDir else { throw HarnessError("PostgreSQL is not installed") }
        pid = try spawnServer(
            Self.asOwner + ["\(bin)/postgres", "-D", data], output: dir.appending(path: "server.log").path)
        let deadline = ContinuousClock.now + .seconds(20)
        while ContinuousClock.now < deadline {
            if acceptsConnections(port), (try? await psql("SELECT 1")) != nil { return }
            try await Task.sleep(for: .milliseconds(50))
        }
        throw HarnessError("PostgreSQL did not start on port \(port): \(log.suffix(800))")
    }

    /// A fast shutdown (SIGINT: sessions are ended, the server stops cleanly), as a service restart does.
    public func stop() {
        guard let p = pid else { return }
        stopServer(p, signal: SIGINT, grace: 10)
        pid = nil
    }

    /// An immediate shutdown (SIGQUIT): every server process aborts without a checkpoint, as in a crash or a power
    /// cut; the next start runs crash recovery from the WAL. (SIGKILL of the postmaster alone would leave its
    /// backends running and the next start refused.)
    public func crash() {
        guard let p = pid else { return }
        stopServer(p, signal: SIGQUIT, grace: 10)
        pid = nil
    }

    public var log: String { (try? String(contentsOf: dir.appending(path: "server.log"), encoding: .utf8)) ?? "" }

    private var data: String { dir.appending(path: "data").path }

    /// The prefix that runs a server program as the cluster's owner: nothing, or `setpriv` to `postgres` as root.
    /// (setpriv execs in place, so the pid the test holds is the server's own.)
    private static var asOwner: [String] {
        getuid() == 0 ? ["/usr/bin/setpriv", "--reuid=postgres", "--regid=postgres", "--init-groups", "--"] : []
    }
}
