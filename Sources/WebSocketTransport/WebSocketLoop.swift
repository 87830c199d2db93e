import CLibWebSockets
import Core
import Foundation
import Synchronization
@_spi(ExperimentalScheduling) import _Concurrency

/// One libwebsockets context served by one thread, and that thread as a `SerialExecutor` (SE-0392).
///
/// lws is single-threaded: every lws call happens on the loop's thread. An actor that takes the loop's executor as
/// its own (the hub connection does) runs on that thread too, so a frame is read, decoded and handed on by the thread
/// that received it: reading a frame wakes no other thread. Other threads queue work and wake the loop with
/// `lws_cancel_service`, the one lws call allowed from any thread. Between two rounds of `lws_service` the loop runs
/// the jobs queued for it, then whatever its connections were asked to do (write, close, read again).
///
/// A task that prefers `taskExecutor` (a hub connection's receive loop does) is resumed here by a continuation, rather
/// than on the global pool, which would only queue it back here: a frame read wakes no other thread.
///
/// The thread starts at the loop's first work and its context lives with the loop, for every connection made on it;
/// the context is made again with TLS when a `wss://` connection comes to one without it (while none is open), so a
/// `ws://` link never loads a CA store.
public final class WebSocketLoop: SerialExecutor, @unchecked Sendable {
    // @unchecked: `shared` is a Mutex; every other field is touched by the loop's thread alone (and `init`).

    private struct Shared {
        var jobs: [Job] = []
        /// Connections that were asked to do something (start, write, close, read again, give up).
        var requests: [LWSConnection] = []
        /// In order of `due`: the earliest first, the due ones a prefix.
        var timers: [Timer] = []
        var lastTimer: UInt64 = 0
        var shutdown = false
        var threadStarted = false
        /// The thread has ended: a job of a task that prefers the loop goes to the global pool.
        var ended = false
        /// The context while it may be woken; cleared under the lock before it is destroyed.
        var wakeTarget: UncheckedPointer?
        /// A wake-up is on its way: the loop will look at the queues before it sleeps again.
        var woken = false
    }

    /// A job of an actor on the loop (the serial executor), or of a task that prefers the loop (`taskExecutor`).
    private enum Job {
        case serial(UnownedJob)
        case preferring(UnownedJob, UnownedTaskExecutor)
    }

    private struct Timer: Sendable {
        let id: TimerID
        let due: ContinuousClock.Instant
        let action: @Sendable () -> Void
    }

    /// A timer of the loop's, for `cancel`.
    public struct TimerID: Sendable, Equatable {
        fileprivate let value: UInt64
    }

    private let shared = Mutex(Shared())
    private let name: String
    private let caFile: UnsafeMutablePointer<CChar>?
    private let connectTimeout: Duration
    /// The loop's thread, once it runs (0 before): `enqueue` from it needs no wake-up.
    private let thread = Atomic<UInt>(0)

    // The loop's thread only.
    private var context: OpaquePointer?
    private var contextHasTLS = false
    private var live: [ObjectIdentifier: LWSConnection] = [:]
    /// Connections that ended during a round of `lws_service`, released after it (never inside an lws callback).
    private var ended: [LWSConnection] = []
    private var spareJobs: [Job] = []
    private var spareRequests: [LWSConnection] = []
    /// lws's timer: wakes the loop for the earliest of `Shared.timers` (an lws poll timeout, not another thread).
    private let sul: UnsafeMutableRawPointer
    private var sulDue: ContinuousClock.Instant?
    private let protocols: UnsafeMutablePointer<lws_protocols>
    /// `[user:password@]host:port`, or empty for none (which also keeps lws from reading `http_proxy` itself).
    private let proxyAddress: UnsafeMutablePointer<CChar>
    /// The one protocol's name, which each connection asks for.
    let protocolName = strdup("ws")!

    /// - Parameters:
    ///   - name: the thread's name, as `top -H` and gdb show it (at most 15 characters are kept).
    ///   - caFile: PEM file of trusted CAs for `wss://` connections on this loop; the system store when nil.
    ///   - connectTimeout: how long DNS and TCP may take for each connection (lws bounds those two).
    ///   - proxy: the HTTP proxy this loop's connections tunnel through (CONNECT), as `ProxyPolicy` decided for their
    ///     host; nil: directly, whatever `http_proxy` says (lws would otherwise read it alone, for every scheme).
    public init(
        name: String = "lws", caFile: String? = nil, connectTimeout: Duration = .seconds(10),
        proxy: ProxyPolicy.Proxy? = nil
    ) {
        LWSLog.install()
        self.name = name
        self.caFile = caFile.map { strdup($0) }
        self.proxyAddress = strdup(proxy?.address ?? "")!
        self.connectTimeout = connectTimeout
        protocols = .allocate(capacity: 2)
        protocols.initialize(repeating: lws_protocols(), count: 2)
        protocols[0].name = UnsafePointer(protocolName)
        protocols[0].callback = lwsCallback
        protocols[0].rx_buffer_size = 65536
        // The sul first (lws hands its address back), then this loop, for the callback to find.
        sul = .allocate(
            byteCount: MemoryLayout<lws_sorted_usec_list_t>.stride + MemoryLayout<UnsafeRawPointer>.stride,
            alignment: 16)
        sul.initializeMemory(as: UInt8.self, repeating: 0, count: MemoryLayout<lws_sorted_usec_list_t>.stride)
        (sul + MemoryLayout<lws_sorted_usec_list_t>.stride).storeBytes(
            of: Unmanaged.passUnretained(self).toOpaque(), as: UnsafeMutableRawPointer.self)
    }

    deinit {
        if let caFile { free(caFile) }
        free(proxyAddress)
        free(protocolName)
        protocols.deinitialize(count: 2)
        protocols.deallocate()
        sul.deallocate()
    }

    // MARK: - The executor

    public func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let onLoop = isLoopThread
        shared.withLock { s in
            s.jobs.append(.serial(job))
            wakeLocked(&s, onLoop: onLoop)
        }
    }

    /// The loop as the task executor of tasks that prefer it (SE-0417): their jobs run on the loop's thread, between
    /// two rounds of service, as the actors' do; once the loop has ended, on the global pool. Each holds the loop.
    public var taskExecutor: some TaskExecutor { LoopTaskExecutor(loop: self) }

    fileprivate func enqueue(_ job: UnownedJob, preferring executor: UnownedTaskExecutor) {
        let onLoop = isLoopThread
        let ended = shared.withLock { s in
            if s.ended { return true }
            s.jobs.append(.preferring(job, executor))
            wakeLocked(&s, onLoop: onLoop)
            return false
        }
        if ended { globalConcurrentExecutor.enqueue(ExecutorJob(job)) }
    }

    public func asUnownedSerialExecutor() -> UnownedSerialExecutor {
        UnownedSerialExecutor(ordinary: self)
    }

    public func checkIsolated() {
        precondition(isLoopThread, "not on the WebSocket loop's thread (\(name))")
    }

    /// True on the loop's own thread.
    public var isLoopThread: Bool {
        let t = thread.load(ordering: .acquiring)
        return t != 0 && t == UInt(pthread_self())
    }

    /// Runs `action` on the loop's thread after `delay`, between two rounds of lws service (never inside an lws
    /// callback). The wait is lws's own poll timeout: it costs no thread of its own.
    @discardableResult
    public func schedule(after delay: Duration, _ action: @escaping @Sendable () -> Void) -> TimerID {
        let onLoop = isLoopThread
        let due = ContinuousClock.now + delay
        return shared.withLock { s in
            s.lastTimer += 1
            let timer = Timer(id: TimerID(value: s.lastTimer), due: due, action: action)
            // Usually last (the same waits again and again): found from the end.
            let at = s.timers.lastIndex { $0.due <= timer.due }.map { $0 + 1 } ?? 0
            s.timers.insert(timer, at: at)
            wakeLocked(&s, onLoop: onLoop)
            return timer.id
        }
    }

    /// Takes back a timer that has not run yet (one that ran, or is running, is left alone): a wait that ended
    /// early does not wake the loop later for nothing.
    public func cancel(_ timer: TimerID) {
        shared.withLock { s in
            if let at = s.timers.lastIndex(where: { $0.id == timer }) { s.timers.remove(at: at) }
        }
    }

    /// Timers not run yet (for tests).
    var pendingTimers: Int { shared.withLock { $0.timers.count } }

    /// Ends the loop: open connections are dropped, the context is destroyed and the thread exits once it has run
    /// what was queued.
    public func shutdown() {
        let onLoop = isLoopThread
        shared.withLock { s in
            s.shutdown = true
            if s.threadStarted { wakeLocked(&s, onLoop: onLoop) }  // a loop that never ran starts no thread to end
        }
    }

    /// Starts the thread at the first work; wakes it (once until it looks) from any other thread. The wake-up runs
    /// under the lock so that the loop cannot destroy the context in between.
    private func wakeLocked(_ s: inout Shared, onLoop: Bool) {
        if !s.threadStarted {
            s.threadStarted = true
            startThread()
            return
        }
        guard !onLoop, !s.woken, let target = s.wakeTarget else { return }
        s.woken = true
        lws_cancel_service(target.pointer)
    }

    // MARK: - Connections (any thread)

    /// `connection` has something for the loop to do: start, write, close, read again or give up.
    func request(_ connection: LWSConnection) {
        let onLoop = isLoopThread
        shared.withLock { s in
            s.requests.append(connection)
            wakeLocked(&s, onLoop: onLoop)
        }
    }

    // MARK: - The loop's thread

    private func startThread() {
        let retained = Unmanaged.passRetained(self)
        let thread = Thread { [name] in
            ThreadName.set(name)
            let loop = retained.takeRetainedValue()
            loop.thread.store(UInt(pthread_self()), ordering: .releasing)
            loop.serve()
        }
        thread.start()
    }

    private func serve() {
        _ = context(tls: false)
        while true {
            runQueued()
            if shared.withLock({ $0.shutdown }) { break }
            if let context {
                armTimer()
                lws_service(context, 0)
                ended.removeAll()
            } else {
                // lws could not make a context (out of memory, file descriptors): each connection fails with that
                // error; try again shortly.
                usleep(10_000)
                _ = context(tls: false)
            }
        }
        for connection in live.values { connection.abandon() }
        live = [:]
        ended.removeAll()
        destroyContext()
        // What the abandoned connections woke: their readers end on the pool. An actor's job that comes now stays
        // queued: no thread is left that may run it.
        let left = shared.withLock { s in
            s.ended = true
            defer { s.jobs.removeAll { if case .preferring = $0 { true } else { false } } }
            return s.jobs
        }
        for case .preferring(let job, _) in left { globalConcurrentExecutor.enqueue(ExecutorJob(job)) }
    }

    /// Jobs, then connection requests, then due timers, until none is left.
    private func runQueued() {
        while true {
            var jobs = spareJobs
            var requests = spareRequests
            var due: [Timer] = []
            let now = ContinuousClock.now
            shared.withLock { s in
                s.woken = false
                swap(&jobs, &s.jobs)
                swap(&requests, &s.requests)
                if let first = s.timers.first, first.due <= now {
                    let end = s.timers.firstIndex { $0.due > now } ?? s.timers.endIndex
                    due = Array(s.timers[..<end])
                    s.timers.removeFirst(end)
                }
            }
            if jobs.isEmpty && requests.isEmpty && due.isEmpty {
                spareJobs = jobs
                spareRequests = requests
                return
            }
            let executor = asUnownedSerialExecutor()
            for job in jobs {
                switch job {
                case .serial(let job): job.runSynchronously(on: executor)
                case .preferring(let job, let task): job.runSynchronously(isolatedTo: executor, taskExecutor: task)
                }
            }
            for connection in requests { connection.serve() }
            for timer in due { timer.action() }
            jobs.removeAll(keepingCapacity: true)
            requests.removeAll(keepingCapacity: true)
            spareJobs = jobs
            spareRequests = requests
            ended.removeAll()
        }
    }

    /// The next timer, as lws's poll timeout.
    private func armTimer() {
        let next = shared.withLock { s in s.timers.first?.due }
        guard let context, next != sulDue else { return }
        let head = sul.assumingMemoryBound(to: lws_sorted_usec_list_t.self)
        lws_sul_cancel(head)  // out of lws's list before it goes in again at another time
        if let next {
            let wait = max(.zero, next - .now)
            let us = wait.components.seconds * 1_000_000 + wait.components.attoseconds / 1_000_000_000_000
            lws_sul_schedule(context, 0, head, loopTimerFired, lws_usec_t(max(1, us)))
        }
        sulDue = next
    }

    fileprivate func timerFired() {
        // The timers that are due run after this round of service. lws runs a ripe sul before it polls, and with no
        // other sul left the poll would wait for the network: end the round now.
        sulDue = nil
        if let context { lws_cancel_service(context) }
    }

    /// The context for a connection; with TLS when it needs it (made again without a connection open).
    func context(tls: Bool) -> OpaquePointer? {
        if let context, contextHasTLS || !tls { return context }
        if context != nil {
            guard live.isEmpty else { return nil }
            destroyContext()
        }
        var info = lws_context_creation_info()
        info.port = CONTEXT_PORT_NO_LISTEN
        info.protocols = UnsafePointer(protocols)
        info.gid = -1
        info.uid = -1
        let timeout = UInt32(clamping: max(1, connectTimeout.components.seconds))
        info.connect_timeout_secs = timeout
        info.timeout_secs = timeout
        info.http_proxy_address = UnsafePointer(proxyAddress)
        if tls {
            info.options |= UInt64(LWS_SERVER_OPTION_DO_SSL_GLOBAL_INIT)
            if let caFile { info.client_ssl_ca_filepath = UnsafePointer(caFile) }
        }
        guard let made = lws_create_context(&info) else { return nil }
        context = made
        contextHasTLS = tls
        sulDue = nil
        shared.withLock { $0.wakeTarget = UncheckedPointer(made) }
        return made
    }

    private func destroyContext() {
        guard let old = context else { return }
        shared.withLock { $0.wakeTarget = nil }
        lws_sul_cancel(sul.assumingMemoryBound(to: lws_sorted_usec_list_t.self))
        lws_context_destroy(old)
        context = nil
        sulDue = nil
    }

    func opened(_ connection: LWSConnection) { live[ObjectIdentifier(connection)] = connection }

    /// Kept until the round of service ends: an lws callback may still be on the connection's stack.
    func closed(_ connection: LWSConnection) {
        if let c = live.removeValue(forKey: ObjectIdentifier(connection)) { ended.append(c) }
    }
}

/// lws's timer callback: the loop is stored right after the sul.
private func loopTimerFired(_ sul: UnsafeMutablePointer<lws_sorted_usec_list_t>?) {
    guard let sul else { return }
    let raw = (UnsafeMutableRawPointer(sul) + MemoryLayout<lws_sorted_usec_list_t>.stride).load(
        as: UnsafeMutableRawPointer.self)
    Unmanaged<WebSocketLoop>.fromOpaque(raw).takeUnretainedValue().timerFired()
}

/// The lws callback: a top-level function, as C needs. The connection is the wsi's opaque user data (nil once it has
/// ended, and for lws's own wake-up pipe: the loop looks at its queues after each round of service anyway).
private func lwsCallback(
    wsi: OpaquePointer?, reason: lws_callback_reasons, user: UnsafeMutableRawPointer?,
    input: UnsafeMutableRawPointer?, len: Int
) -> Int32 {
    guard let wsi, reason != LWS_CALLBACK_EVENT_WAIT_CANCELLED, let raw = lws_get_opaque_user_data(wsi) else {
        return 0
    }
    let connection = Unmanaged<LWSConnection>.fromOpaque(raw).takeUnretainedValue()
    if reason == LWS_CALLBACK_OPENSSL_PERFORM_SERVER_CERT_VERIFICATION {
        // `user` is the X509_STORE_CTX: the name must be in subjectAltName, as for every other transport.
        guard let user, !connection.options.allowInsecureTLS, clws_refuse_without_subject_alt_name(user) != 0 else {
            return 0
        }
        connection.lacksSubjectAltName = true
        return 1
    }
    return connection.handle(wsi, reason, input, len)
}

/// An lws context pointer passed between threads; what may be done with it is said where it is used.
struct UncheckedPointer: @unchecked Sendable {
    let pointer: OpaquePointer
    init(_ pointer: OpaquePointer) { self.pointer = pointer }
}

/// A sleep of an actor on the loop (the hub connection's waits for the server) is kept by the alarm clock and resumes
/// on the loop directly, not through the default pool first.
@_spi(Scheduling) extension WebSocketLoop: SchedulingExecutor {
    public func enqueue<C: Clock>(
        _ job: consuming ExecutorJob, after delay: C.Duration, tolerance: C.Duration?, clock: C
    ) {
        AlarmClock.shared.wake(UnownedJob(job), after: delay, tolerance: tolerance, clock: clock)
    }
}

/// `WebSocketLoop.taskExecutor`: a task holds its preferred executor, and this holds the loop. A sleep of such a
/// task (the keep-alive's) is kept by the alarm clock and resumes on the loop directly.
private final class LoopTaskExecutor: TaskExecutor, SchedulingExecutor {
    let loop: WebSocketLoop

    init(loop: WebSocketLoop) { self.loop = loop }

    func enqueue(_ job: consuming ExecutorJob) {
        loop.enqueue(UnownedJob(job), preferring: asUnownedTaskExecutor())
    }

    func enqueue<C: Clock>(_ job: consuming ExecutorJob, after delay: C.Duration, tolerance: C.Duration?, clock: C) {
        AlarmClock.shared.wake(UnownedJob(job), after: delay, tolerance: tolerance, clock: clock)
    }
}
