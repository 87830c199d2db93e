import CLibWebSockets
import Core
import Foundation
import Logging
import Synchronization

/// A WebSocket client connection on libwebsockets.
///
/// Each connection lives on a `WebSocketLoop`: one lws context served by one thread. lws is single-threaded: other
/// threads only queue work under a lock and wake the loop with `lws_cancel_service`; every lws call on the connection
/// happens on the loop's thread. A connection made without a loop gets one of its own, which ends with it.
public final class WebSocket: Sendable {
    /// The messages as they arrive, in order. Iteration ends (nil) after a close handshake and throws a
    /// `WebSocketError` when the connection breaks. Read it from one task.
    public let messages: WebSocketInbox

    private let core: LWSConnection

    private init(core: LWSConnection) {
        self.core = core
        self.messages = core.inbox
    }

    /// Opens a connection and waits for the upgrade to complete.
    /// - Parameter loop: the loop to serve the connection on (an actor whose executor it is reads the frames on the
    ///   thread that received them); nil: a loop of its own. A given loop's CA file and connect timeout apply, not
    ///   those of `options`.
    public static func connect(
        to url: URL, options: WebSocketOptions = .init(), logger: Logger = Logger(label: "websocket"), loop: WebSocketLoop? = nil
    ) async throws(WebSocketError) -> WebSocket {
        let address = try WebSocketAddress(url)
        // The header's name only: its value may be a secret.
        if let bad = options.headers.first(where: { !HeaderValue.isSafe($0.value) || !HeaderValue.isSafe($0.name) }) {
            throw WebSocketError(.setupFailed, "The request header '\(bad.name)' holds a line break or another control character: refused.")
        }
        if address.secure && options.allowInsecureTLS {
            logger.warning(
                "TLS certificate and host name checks are OFF for this connection (insecure option; tests only)",
                metadata: ["host": "\(address.host)"])
        }
        let core = LWSConnection(address: address, options: options, loop: loop)
        let result: Result<Void, WebSocketError> = await withCheckedContinuation { continuation in
            core.start { continuation.resume(returning: $0) }
        }
        if case .failure(let error) = result {
            await core.waitUntilStopped()
            throw error
        }
        return WebSocket(core: core)
    }

    /// Queues a message; frames are written in order by the service thread.
    public func send(_ message: WebSocketMessage) throws(WebSocketError) {
        try core.enqueue(message)
    }

    /// Bytes queued for sending and not yet handed to the socket.
    public var bufferedAmount: Int { core.bufferedAmount }

    /// How the connection ended, once it has.
    public var closeInfo: WebSocketClose? { core.closeInfo }

    /// Sends a close frame with `code` and `reason`, waits briefly for the peer's answer, and returns once lws
    /// has let go of the connection.
    public func close(code: UInt16 = 1000, reason: String = "") async {
        core.requestClose(code: code, reason: reason)
        await core.waitUntilStopped(grace: .seconds(2))
    }
}

/// The received messages of one connection, with back-pressure on the socket.
public final class WebSocketInbox: AsyncSequence, Sendable {
    public typealias Element = WebSocketMessage
    public typealias Failure = WebSocketError

    private struct State {
        var queue: [WebSocketMessage] = []
        var head = 0
        /// The reader waiting; resumed with nil when its wait's time ran out (`nextBatch(within:)`).
        var waiter: CheckedContinuation<Result<WebSocketMessage?, WebSocketError>?, Never>?
        /// The number of the last wait, so that a timer meant for an earlier one does not end a later one.
        var waits = 0
        var end: Result<Void, WebSocketError>?
        var paused = false
        /// The bytes of the messages waiting.
        var bytes = 0
        var count: Int { queue.count - head }
    }

    private let state = Mutex(State())
    private let highWater: Int
    private let highWaterBytes: Int
    /// Asks the service thread to read the socket again (set once by the connection).
    /// Boxed: a closure stored directly in a Mutex gains two reabstraction thunks per `withLock` (see Store).
    private let resumeHook = Mutex<HookBox?>(nil)

    /// Runs an action after a delay on the connection's loop (for `nextBatch(within:)`).
    private let schedule: @Sendable (Duration, @escaping @Sendable () -> Void) -> Void

    init(highWater: Int, highWaterBytes: Int = .max, schedule: @escaping @Sendable (Duration, @escaping @Sendable () -> Void) -> Void) {
        self.highWater = Swift.max(2, highWater)
        self.highWaterBytes = Swift.max(1, highWaterBytes)
        self.schedule = schedule
    }

    private func full(_ s: State) -> Bool { s.count >= highWater || s.bytes >= highWaterBytes }
    /// Reading resumes once the reader has taken half of what was waiting, by count and by bytes.
    private func drained(_ s: State) -> Bool { s.count <= highWater / 2 && s.bytes <= highWaterBytes / 2 }

    func onResume(_ hook: @escaping @Sendable () -> Void) {
        let box = HookBox(hook)
        resumeHook.withLock { $0 = box }
    }

    /// Service thread: a message arrived. Returns true when the socket should stop being read.
    func push(_ message: WebSocketMessage) -> Bool {
        let (waiter, pause): (CheckedContinuation<Result<WebSocketMessage?, WebSocketError>?, Never>?, Bool) =
            state.withLock { s in
                if let w = s.waiter {
                    s.waiter = nil
                    return (w, false)
                }
                s.queue.append(message)
                s.bytes += message.count
                if full(s) && !s.paused {
                    s.paused = true
                    return (nil, true)
                }
                return (nil, false)
            }
        waiter?.resume(returning: .success(message))
        return pause
    }

    /// Service thread: no more messages. A clean close ends iteration; an error is thrown after the queued messages.
    func finish(_ end: Result<Void, WebSocketError>) {
        let waiter = state.withLock { s -> CheckedContinuation<Result<WebSocketMessage?, WebSocketError>?, Never>? in
            guard s.end == nil else { return nil }
            s.end = end
            defer { s.waiter = nil }
            return s.waiter
        }
        switch end {
        case .success: waiter?.resume(returning: .success(nil))
        case .failure(let e): waiter?.resume(returning: .failure(e))
        }
    }

    /// Every message waiting (at least one, waiting for it if need be); nil after a clean close. A reader that
    /// falls behind takes the backlog in one wake-up instead of one per message. The wait stays on the caller's
    /// actor: a reader on the connection's loop is resumed on the loop's thread, with no other thread woken.
    public func nextBatch(isolation: isolated (any Actor)? = #isolation) async throws(WebSocketError) -> [WebSocketMessage]? {
        try await nextBatch(within: nil, isolation: isolation)
    }

    /// Like `nextBatch()`, but waits at most `timeout` (nil: as long as it takes) for the first message: [] when none
    /// came in time. The timer is the loop's own (an lws poll timeout), so a wait that runs out wakes no other thread.
    public func nextBatch(
        within timeout: Duration?, isolation: isolated (any Actor)? = #isolation
    ) async throws(WebSocketError) -> [WebSocketMessage]? {
        let (taken, wake) = state.withLock { s -> ([WebSocketMessage], Bool) in
            guard s.count > 0 else { return ([], false) }
            let batch = Array(s.queue[s.head...])
            s.queue.removeAll(keepingCapacity: s.queue.capacity <= 4 * highWater)
            s.head = 0
            s.bytes = 0
            defer { s.paused = false }
            return (batch, s.paused)
        }
        if wake { resumeHook.withLock { $0 }?.hook() }
        if !taken.isEmpty { return taken }
        guard let result = await wait(within: timeout, isolation: isolation) else { return [] }
        return try result.get().map { [$0] }
    }

    func next(isolation: isolated (any Actor)? = #isolation) async throws(WebSocketError) -> WebSocketMessage? {
        try await wait(within: nil, isolation: isolation)!.get()
    }

    /// The next message, the end, or nil when `timeout` passed first.
    private func wait(
        within timeout: Duration?, isolation: isolated (any Actor)?
    ) async -> Result<WebSocketMessage?, WebSocketError>? {
        await withCheckedContinuation(isolation: isolation) { continuation in
            let (immediate, wake): (Result<WebSocketMessage?, WebSocketError>?, Bool) = state.withLock { s in
                if s.count > 0 {
                    let m = s.queue[s.head]
                    s.head += 1
                    s.bytes -= m.count
                    if s.head > 1024 && s.head * 2 > s.queue.count {
                        s.queue.removeFirst(s.head)
                        s.head = 0
                    }
                    var wake = false
                    if s.paused && drained(s) {
                        s.paused = false
                        wake = true
                    }
                    return (.success(m), wake)
                }
                if let end = s.end {
                    switch end {
                    case .success: return (.success(nil), false)
                    case .failure(let e): return (.failure(e), false)
                    }
                }
                s.waiter = continuation
                s.waits += 1
                if let timeout {
                    let ticket = s.waits
                    schedule(timeout) { [self] in expire(ticket) }
                }
                return (nil, false)
            }
            if wake { resumeHook.withLock { $0 }?.hook() }
            if let immediate { continuation.resume(returning: immediate) }
        }
    }

    private func expire(_ ticket: Int) {
        let waiter = state.withLock { s -> CheckedContinuation<Result<WebSocketMessage?, WebSocketError>?, Never>? in
            guard s.waits == ticket else { return nil }
            defer { s.waiter = nil }
            return s.waiter
        }
        waiter?.resume(returning: nil)
    }

    public struct AsyncIterator: AsyncIteratorProtocol {
        let inbox: WebSocketInbox
        public mutating func next() async throws(WebSocketError) -> WebSocketMessage? { try await inbox.next(isolation: nil) }
        public mutating func next(isolation actor: isolated (any Actor)?) async throws(WebSocketError) -> WebSocketMessage? {
            try await inbox.next(isolation: actor)
        }
    }

    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(inbox: self) }
}

final class HookBox: Sendable {
    let hook: @Sendable () -> Void
    init(_ hook: @escaping @Sendable () -> Void) { self.hook = hook }
}
