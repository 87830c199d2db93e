import Foundation
import Synchronization

/// The servers started and not stopped yet: a test that ended early (a time limit, a failed `#require`) can leave
/// its server's owner alive until the process exits, and its deinit never runs; they are told to stop at exit.
private let running = Mutex<Set<pid_t>>([])
private let stopAtExit: Void = {
    atexit {
        for pid in running.withLock({ $0 }) { kill(pid, SIGTERM) }
    }
}()

/// Starts a server program for a test and returns its pid, without waiting: stdin from `input` (/dev/null unless
/// said), stdout and stderr into `output`. Every signal unblocked and at its default: a test process blocks or ignores some
/// (swift-service-lifecycle), and a child would inherit that and, say, never save its state on a SIGTERM.
public func spawnServer(_ args: [String], input: String = "/dev/null", output: String) throws -> pid_t {
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
    posix_spawn_file_actions_addopen(&actions, 0, input, O_RDONLY, 0)
    posix_spawn_file_actions_addopen(&actions, 1, output, O_WRONLY | O_CREAT | O_APPEND, 0o644)
    posix_spawn_file_actions_adddup2(&actions, 1, 2)
    let argv: [UnsafeMutablePointer<CChar>?] = args.map { strdup($0) } + [nil]
    defer { argv.forEach { free($0) } }
    var child = pid_t()
    guard posix_spawn(&child, args[0], &actions, &attributes, argv, environ) == 0 else {
        throw HarnessError("cannot start \(args[0])")
    }
    _ = stopAtExit
    running.withLock { _ = $0.insert(child) }
    return child
}

/// Sends `signal` and reaps the process, with SIGKILL after `grace`.
public func stopServer(_ pid: pid_t, signal: Int32 = SIGTERM, grace: TimeInterval = 5) {
    defer { running.withLock { _ = $0.remove(pid) } }
    kill(pid, signal)
    var status: Int32 = 0
    let deadline = Date().addingTimeInterval(grace)
    while waitpid(pid, &status, WNOHANG) == 0 {
        if Date() > deadline {
            kill(pid, SIGKILL)
            waitpid(pid, &status, 0)
            return
        }
        Thread.sleep(forTimeInterval: 0.02)
    }
}

/// Whether something accepts TCP connections on 127.0.0.1:`port`.
public func acceptsConnections(_ port: Int) -> Bool {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(fd) }
    var addr = sockaddr_in()
    addr.sin_family = sa_family_t(AF_INET)
    addr.sin_port = in_port_t(UInt16(port).bigEndian)
    addr.sin_addr.s_addr = inet_addr("127.0.0.1")
    return withUnsafePointer(to: &addr) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
        }
    } == 0
}
