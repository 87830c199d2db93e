import Glibc

/// A descriptor that another thread can make readable, to end a `poll` early: for a thread that sleeps in `poll` on
/// a library's socket with no timeout of its own (a session bus, a database session) and must still see a stop or
/// new work at once, without waking on a timer to look. A pipe, both ends non-blocking and closed on exec.
public final class PollWake: Sendable {
    /// The end to poll for `POLLIN`.
    public let fd: Int32
    private let writeEnd: Int32

    public init() {
        var ends: [Int32] = [-1, -1]
        if pipe(&ends) == 0 {
            for end in ends {
                _ = fcntl(end, F_SETFL, fcntl(end, F_GETFL) | O_NONBLOCK)
                _ = fcntl(end, F_SETFD, FD_CLOEXEC)
            }
        }
        (fd, writeEnd) = (ends[0], ends[1])
    }

    deinit {
        if fd >= 0 {
            close(fd)
            close(writeEnd)
        }
    }

    /// Makes `fd` readable until `drain`; from any thread. A full pipe is readable already.
    public func signal() {
        var byte: UInt8 = 1
        _ = write(writeEnd, &byte, 1)
    }

    /// Empties the pipe: `fd` is readable again after the next `signal`.
    public func drain() {
        var buffer = (UInt64(0), UInt64(0), UInt64(0), UInt64(0))
        while withUnsafeMutableBytes(of: &buffer, { read(fd, $0.baseAddress, $0.count) }) > 0 {}
    }
}
