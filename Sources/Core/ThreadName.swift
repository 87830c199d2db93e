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

/// A named thread of the process's own, outside the Swift pool and libdispatch: detached for a loop that owns it for
/// good, joinable for an owner that waits for its end.
public enum OwnThread {
    private final class Body {
        let name: String
        let run: () -> Void
        init(_ name: String, _ run: @escaping () -> Void) {
            (self.name, self.run) = (name, run)
        }
    }

    /// Starts `body` on a new, detached thread named `name` (see `ThreadName`); what `body` captures lives until it
    /// returns. A thread that cannot be started (the process is out of threads) is a fatal error that says so.
    public static func startDetached(named name: String, _ body: @escaping () -> Void) {
        pthread_detach(startJoinable(named: name, body))
    }

    /// The same, but the thread is left joinable: its owner waits for its whole end with `pthread_join` (or detaches
    /// it). What `body` captures lives until it returns.
    public static func startJoinable(named name: String, _ body: @escaping () -> Void) -> pthread_t {
        var thread = pthread_t()
        let context = Unmanaged.passRetained(Body(name, body)).toOpaque()
        let started = pthread_create(
            &thread, nil,
            { context in
                let body = Unmanaged<Body>.fromOpaque(context!).takeRetainedValue()
                ThreadName.set(body.name)
                body.run()
                return nil
            }, context)
        precondition(started == 0, "cannot start the \(name) thread: error \(started)")
        return thread
    }
}
