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

    public init(users: [(name: String, password: String)] = []) async throws {
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
            _ = FileManager.default.createFile(atPath: passwords, contents: nil)  // mosquitto_passwd says if not
            for user in users {
                _ = try await runCommand(["mosquitto_passwd", "-b", passwords, user.name, user.password])
            }
            conf += "allow_anonymous false\npassword_file \(passwords)\n"
        } else {
            conf += "allow_anonymous true\n"
        }
        try conf.write(to: dir.appending(path: "mosquitto.conf"), atomically: true, encoding: .utf8)
        try await start()
    }

    deinit { stop() }

    public var url: String { "mqtt://127.0.0.1:\(port)" }

    /// Starts the broker and waits (up to 10 s) until it accepts connections.
    public func start() async throws {
        guard let binary = Self.binary else {
            throw HarnessError("mosquitto is not installed (apt-get install mosquitto)")
        }
        let output = dir.appending(path: "stdout").path
        unlink(output)
        pid = try spawnServer([binary, "-c", dir.appending(path: "mosquitto.conf").path], output: output)
        let deadline = ContinuousClock.now + .seconds(10)
        while ContinuousClock.now < deadline {
            if acceptsConnections(port) { return }
            try await Task.sleep(for: .milliseconds(50))
        }
        throw HarnessError("mosquitto did not start on port \(port): \(log.suffix(500))")
    }

    /// SIGTERM: the broker saves its sessions and queued messages, as on a service restart.
    public func stop() {
        guard let p = pid else { return }
        stopServer(p)
        pid = nil
    }

    /// SIGSTOP: the broker holds its sockets open but answers nothing (a hung broker) until `thaw`.
    public func freeze() { if let pid { kill(pid, SIGSTOP) } }
    public func thaw() { if let pid { kill(pid, SIGCONT) } }

    /// SIGKILL: a crash, not a service stop; nothing is saved beyond what persistence had written.
    public func crash() {
        guard let p = pid else { return }
        stopServer(p, signal: SIGKILL)
        pid = nil
    }

    public var log: String { (try? String(contentsOf: dir.appending(path: "mosquitto.log"), encoding: .utf8)) ?? "" }
}
