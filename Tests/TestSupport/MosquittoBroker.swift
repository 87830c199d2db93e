import Foundation

/// A real Eclipse Mosquitto broker (Debian's `mosquitto`) on a loopback port of its own, with persistence, so that
/// a restart keeps the sessions of subscribers and what they were owed. Optionally with a user and a password.
public final class MosquittoBroker: @unchecked Sendable {
    public let port: Int
    public let dir: URL
    private var pid: pid_t?

    public static var binary: String? {
        ["/usr/sbin/mosquitto", "/usr/bin/mosquitto"].first { FileManager.default.isExecutableFile(atPath: $0) }
    }

    public init(users: [(name: String, password: String)] = []) throws {
        port = try freeLoopbackPortOutsideEphemeralRange()
        dir = FileManager.default.temporaryDirectory.appending(path: "mosquitto-\(UUID())")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        var conf = """
            listener \(port) 127.0.0.1
            persistence true
            persistence_location \(dir.path)/
            log_dest file \(dir.path)/mosquitto.log
            log_type all

            """
        // As root, mosquitto would drop to its own user, which cannot write into our directory.
        if getuid() == 0 { conf += "user root\n" }
        if !users.isEmpty {
            let passwords = dir.appending(path: "passwords").path
            FileManager.default.createFile(atPath: passwords, contents: nil)
            for user in users { _ = try runCommand(["mosquitto_passwd", "-b", passwords, user.name, user.password]) }
            conf += "allow_anonymous false\npassword_file \(passwords)\n"
        } else {
            conf += "allow_anonymous true\n"
        }
        try conf.write(to: dir.appending(path: "mosquitto.conf"), atomically: true, encoding: .utf8)
        try start()
    }

    deinit { stop() }

    public var url: String { "mqtt://127.0.0.1:\(port)" }

    /// Starts the broker and waits (up to 10 s) until it accepts connections.
    public func start() throws {
        guard let binary = Self.binary else { throw HarnessError("mosquitto is not installed (apt-get install mosquitto)") }
        // posix_spawn with every signal unblocked and at its default: a test process blocks or ignores SIGTERM
        // (swift-service-lifecycle), and a child would inherit that and never save its sessions on a stop.
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var none = sigset_t()
        sigemptyset(&none)
        var all = sigset_t()
        sigfillset(&all)
        posix_spawnattr_setsigmask(&attributes, &none)
        posix_spawnattr_setsigdefault(&attributes, &all)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, dir.appending(path: "stdout").path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        let conf: String = dir.appending(path: "mosquitto.conf").path
        let args: [String] = [binary, "-c", conf]
        let argv: [UnsafeMutablePointer<CChar>?] = args.map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var child = pid_t()
        guard posix_spawn(&child, binary, &actions, &attributes, argv, environ) == 0 else { throw HarnessError("cannot start mosquitto") }
        pid = child
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline {
            if Self.accepts(port) { return }
            Thread.sleep(forTimeInterval: 0.05)
        }
        throw HarnessError("mosquitto did not start on port \(port): \(log.suffix(500))")
    }

    /// SIGTERM: the broker saves its sessions and queued messages, as on a service restart.
    public func stop() {
        guard let p = pid else { return }
        kill(p, SIGTERM)
        var status: Int32 = 0
        let deadline = Date().addingTimeInterval(5)
        while waitpid(p, &status, WNOHANG) == 0 {
            if Date() > deadline {
                kill(p, SIGKILL)
                waitpid(p, &status, 0)
                break
            }
            Thread.sleep(forTimeInterval: 0.02)
        }
        pid = nil
    }

    public var log: String { (try? String(contentsOf: dir.appending(path: "mosquitto.log"), encoding: .utf8)) ?? "" }

    private static func accepts(_ port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = in_port_t(UInt16(port).bigEndian)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        return withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } } == 0
    }
}
