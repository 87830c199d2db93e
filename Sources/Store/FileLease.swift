import CLinux
import Core
import Foundation
import StoreContract
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// One relay per SQLite file: an exclusive `flock` on `<database>.lock`, held for the relay's whole run. The file's
/// ledger has no claims, so a second relay started on the same file must not send from it: it waits as a standby
/// and takes over when the first one ends, however it ends (the system lets go of the lock of a dead process). The
/// CLI's commands do not take it: they read the file beside the running relay as before.
///
/// A standby sleeps with no timer: the holder writes who it is into the lock file (`LockHolder`), and the standby
/// waits on a descriptor of that process (`pidfd_open`), which the kernel makes readable the moment it ends. A holder
/// it cannot watch (an older release that wrote nothing, a process of another machine or PID namespace, this very
/// process) is tried once a second instead.
public final class FileLease: WatchedLease {
    public let path: String
    private let descriptor = Mutex<Int32?>(nil)

    public init(database: String) {
        path = database + ".lock"
    }

    public func tryAcquire() throws(StoreError) -> Bool {
        try descriptor.withLock { fd throws(StoreError) in
            if fd != nil { return true }
            let opened = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
            guard opened >= 0 else {
                throw StoreError(
                    path: path,
                    "Cannot open the relay's lock file (\(String(cString: strerror(errno)))). Check the folder's owner and permissions.",
                    code: .notWritable)
            }
            guard flock(opened, LOCK_EX | LOCK_NB) == 0 else {
                close(opened)
                return false
            }
            if let me = LockHolder.current {
                let line = Array(me.line.utf8)
                _ = ftruncate(opened, 0)
                _ = pwrite(opened, line, line.count, 0)
            }
            fd = opened
            return true
        }
    }

    /// Sleeps until this relay holds the lock (true) or `wake` is signalled (false): on the holder's process
    /// descriptor when the holder can be watched, otherwise a try each second. A holder that let go of the lock and
    /// lives on (a test's process) is still found within a minute.
    public func acquire(until wake: PollWake) throws(StoreError) -> Bool {
        while true {
            if try tryAcquire() { return true }
            let holder = LockHolder.read(path)?.watched()
            defer { if let holder { close(holder) } }
            var fds = [pollfd(fd: wake.fd, events: Int16(POLLIN), revents: 0)]
            if let holder { fds.append(pollfd(fd: holder, events: Int16(POLLIN), revents: 0)) }
            if poll(&fds, nfds_t(fds.count), holder == nil ? 1000 : 60_000) > 0, fds[0].revents != 0 { return false }
        }
    }

    /// The kernel keeps the lock for as long as its descriptor is open: it cannot be lost, only let go. So this
    /// only waits for `wake`.
    public func watch(until wake: PollWake) {
        var fds = [pollfd(fd: wake.fd, events: Int16(POLLIN), revents: 0)]
        while poll(&fds, 1, -1) < 0, errno == EINTR {}
    }

    public var isHeld: Bool { descriptor.withLock { $0 != nil } }

    public func release() {
        descriptor.withLock { fd in
            if let held = fd { close(held) }  // closing the descriptor lets go of the lock
            fd = nil
        }
    }
}

/// Who holds a lock file, as this machine's kernel knows them: the process's id and start time (so that an id the
/// system gave again to another process is not taken for the holder), its PID namespace and the machine's boot (an
/// id means nothing outside them). One line in the lock file.
struct LockHolder: Equatable, Sendable {
    var pid: Int32
    /// Clock ticks after boot (`/proc/PID/stat`, field 22).
    var started: UInt64
    var namespace: String
    var boot: String

    var line: String { "allowance-relay pid=\(pid) started=\(started) pidns=\(namespace) boot=\(boot)\n" }

    /// This process; nil where /proc does not say (then nobody watches it, and standbys try each second). The boot
    /// id is empty where /proc/sys is hidden (systemd's `ProcSubset=pid`, as the system unit runs): the process id,
    /// its start time and the PID namespace still tell it apart.
    static let current: LockHolder? = {
        let pid = getpid()
        var link = [CChar](repeating: 0, count: 64)
        let length = readlink("/proc/self/ns/pid", &link, link.count - 1)
        guard length > 0, let started = startTime(of: pid) else { return nil }
        let namespace = String(decoding: link[..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)
        let boot = (try? String(contentsOfFile: "/proc/sys/kernel/random/boot_id", encoding: .utf8)) ?? ""
        return LockHolder(
            pid: pid, started: started, namespace: namespace,
            boot: boot.trimmingCharacters(in: .whitespacesAndNewlines))
    }()

    /// The holder a lock file names; nil when it names none (written by an older release, or being written).
    static func read(_ path: String) -> LockHolder? {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { return nil }
        var fields: [Substring: Substring] = [:]
        for word in text.split(whereSeparator: \.isWhitespace) {
            guard let equals = word.firstIndex(of: "=") else { continue }
            fields[word[..<equals]] = word[word.index(after: equals)...]
        }
        guard let pid = fields["pid"].flatMap({ Int32($0) }), let started = fields["started"].flatMap({ UInt64($0) }),
            let namespace = fields["pidns"], let boot = fields["boot"]
        else { return nil }
        return LockHolder(pid: pid, started: started, namespace: String(namespace), boot: String(boot))
    }

    /// A descriptor that becomes readable when this holder's process ends; nil when it cannot be watched from this
    /// process (another machine's, another PID namespace's, this process itself, or already gone).
    func watched() -> Int32? {
        guard let here = LockHolder.current, namespace == here.namespace, boot == here.boot, pid != here.pid else {
            return nil
        }
        let fd = pidfd_open(pid, 0)
        guard fd >= 0 else { return nil }
        // Checked after the descriptor is open: it names the process that had the id then.
        guard LockHolder.startTime(of: pid) == started else {
            close(fd)
            return nil
        }
        return fd
    }

    /// When process `pid` started, in clock ticks after boot; nil once it is gone.
    static func startTime(of pid: Int32) -> UInt64? {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let close = stat.lastIndex(of: ")")
        else { return nil }
        // After the name in parentheses: field 3 (the state) onwards; the start time is field 22.
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        return fields.count > 19 ? UInt64(fields[19]) : nil
    }
}
