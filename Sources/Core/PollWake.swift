import CLinux
import Glibc

/// A descriptor that another thread can make readable, to end a `poll` early: for a thread that sleeps in `poll` on
/// a library's socket with no timeout of its own (a session bus, a database session, libcurl's) and must still see a
/// stop or new work at once, without waking on a timer to look. An eventfd, non-blocking and closed on exec.
public final class PollWake: Sendable {
    /// The descriptor to poll for `POLLIN`.
    public let fd: Int32

    public init() {
        fd = eventfd(0, Int32(EFD_NONBLOCK | EFD_CLOEXEC))
    }

    /// What `init()` makes when the process has no descriptor left: `fd` is -1, which `poll` passes over, and a
    /// signal reaches no one. For the tests of what stands in then.
    package static func unavailable() -> PollWake { PollWake(fd: -1) }

    private init(fd: Int32) {
        self.fd = fd
    }

    deinit {
        if fd >= 0 { close(fd) }
    }

    /// Makes `fd` readable until `drain`; from any thread.
    public func signal() {
        var one: UInt64 = 1
        _ = write(fd, &one, 8)
    }

    /// Empties the counter: `fd` is readable again after the next `signal`.
    public func drain() {
        var count: UInt64 = 0
        _ = read(fd, &count, 8)
    }
}
