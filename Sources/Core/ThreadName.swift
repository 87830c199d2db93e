#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Names the calling thread as `top -H`, gdb, /proc and the benchmarks' per-thread counts show it (at most 15 bytes
/// are kept). A thread otherwise inherits the name of the thread that made it, so every thread made from a Swift pool
/// thread would read "...root.default-qos", and its context switches would be counted as the pool's. Foundation's
/// `Thread.name` does not reach the OS thread on Linux.
public enum ThreadName {
    public static func set(_ name: String) {
        #if os(Linux)
        let fd = open("/proc/thread-self/comm", O_WRONLY)
        guard fd >= 0 else { return }
        defer { close(fd) }
        var bytes = Array(name.utf8.prefix(15))
        _ = write(fd, &bytes, bytes.count)
        #endif
    }
}
