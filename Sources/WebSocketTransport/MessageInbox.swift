import Foundation
import Synchronization

/// The received messages of one connection, in order, whichever transport filled it (a WebSocket here; Server-Sent
/// Events and Long Polling in SignalRClient), read on the connection's loop, with back-pressure on the transport:
/// past its high-water mark `push` says to stop reading, and `onResume`'s hook says when to go on.
public final class MessageInbox: AsyncSequence, Sendable {
    public typealias Element = WebSocketMessage
    public typealias Failure = WebSocketError

    private struct State {
        var queue: [WebSocketMessage] = []
        var head = 0
        /// The reader waiting, told when there is something to take (or the end), or that its wait ran out.
        var waiter: CheckedContinuation<Wake, Never>?
        /// The number of the last wait, so that a timer meant for an earlier one does not end a later one.
        var waits = 0
        /// The timer of the waiter's timed wait, taken back when the wait ends another way.
        var timer: WebSocketLoop.TimerID?
        var end: Result<Void, WebSocketError>?
        var paused = false
        /// The bytes of the messages waiting.
        var bytes = 0
        var count: Int { queue.count - head }

        mutating func takeWaiter() -> Waiter? {
            defer { (waiter, timer) = (nil, nil) }
            return waiter.map { ($0, timer) }
        }
    }

    private enum Wake { case ready, timedOut }

    private let state = Mutex(State())
    private let highWater: Int
    private let highWaterBytes: Int
    /// Asks the service thread to read the socket again (set once by the connection).
    /// Boxed: a closure stored directly in a Mutex gains two reabstraction thunks per `withLock` (see Store).
    private let resumeHook = Mutex<HookBox?>(nil)
    /// The connection's loop, whose timers end `nextBatch(within:)` (nil: such a wait does not time out).
    private let loop: WebSocketLoop?

    /// An inbox read on `loop`: by a WebSocket of it, or by another transport that fills it (Server-Sent Events,
    /// Long Polling: `push` and `finish`), with the same bounds.
    public init(loop: WebSocketLoop?, highWater: Int = 4096, highWaterBytes: Int = 1 << 20) {
        self.highWater = Swift.max(2, highWater)
        self.highWaterBytes = Swift.max(1, highWaterBytes)
        self.loop = loop
    }

    private func full(_ s: State) -> Bool { s.count >= highWater || s.bytes >= highWaterBytes }
    /// Reading resumes once the reader has taken half of what was waiting, by count and by bytes.
    private func drained(_ s: State) -> Bool { s.count <= highWater / 2 && s.bytes <= highWaterBytes / 2 }

    /// Whether the socket is not being read because the messages waiting reached the high-water mark (count or
    /// bytes): the peer is held back by TCP until the reader has taken half.
    public var isHoldingBack: Bool { state.withLock { $0.paused } }

    /// How many messages wait for the reader.
    public var waiting: Int { state.withLock { $0.count } }

    /// Called when a reader has taken enough that the transport may read again (after `push` said to stop).
    public func onResume(_ hook: @escaping @Sendable () -> Void) {
        let box = HookBox(hook)
        resumeHook.withLock { $0 = box }
    }

    /// The transport's thread: a message arrived. Returns true when it should stop reading. The message is queued
    /// even when the reader waits: a reader on the loop runs after this round of reading, and then takes every
    /// message the round brought at once.
    public func push(_ message: WebSocketMessage) -> Bool {
        let (waiter, pause): (Waiter?, Bool) = state.withLock { s in
            s.queue.append(message)
            s.bytes += message.count
            let pause = full(s) && !s.paused
            if pause { s.paused = true }
            return (s.takeWaiter(), pause)
        }
        wake(waiter)
        return pause
    }

    private typealias Waiter = (continuation: CheckedContinuation<Wake, Never>, timer: WebSocketLoop.TimerID?)

    /// Resumes a waiter woken by a message or the end, and takes back its timer.
    private func wake(_ waiter: Waiter?) {
        guard let waiter else { return }
        if let timer = waiter.timer { loop?.cancel(timer) }
        waiter.continuation.resume(returning: .ready)
    }

    /// The transport's thread: no more messages. A clean close ends iteration; an error is thrown after the queued ones.
    public func finish(_ end: Result<Void, WebSocketError>) {
        let waiter = state.withLock { s -> Waiter? in
            guard s.end == nil else { return nil }
            s.end = end
            return s.takeWaiter()
        }
        wake(waiter)
    }

    /// Every message waiting (at least one, waiting for it if need be); nil after a clean close. A reader that
    /// falls behind takes the backlog in one wake-up instead of one per message. The wait stays on the caller's
    /// actor: a reader on the connection's loop is resumed on the loop's thread, with no other thread woken.
    public func nextBatch(
        isolation: isolated (any Actor)? = #isolation
    ) async throws(WebSocketError) -> [WebSocketMessage]? {
        try await nextBatch(within: nil, isolation: isolation)
    }

    /// Like `nextBatch()`, but waits at most `timeout` (nil: as long as it takes) for the first message: [] when none
    /// came in time. The timer is the loop's own (an lws poll timeout), so a wait that runs out wakes no other thread.
    public func nextBatch(
        within timeout: Duration?, isolation: isolated (any Actor)? = #isolation
    ) async throws(WebSocketError) -> [WebSocketMessage]? {
        while true {
            switch try take(all: true) {
            case .messages(let batch): return batch
            case .closed: return nil
            case .nothing: if await wait(within: timeout, isolation: isolation) == .timedOut { return [] }
            }
        }
    }

    func next(isolation: isolated (any Actor)? = #isolation) async throws(WebSocketError) -> WebSocketMessage? {
        while true {
            switch try take(all: false) {
            case .messages(let one): return one.first
            case .closed: return nil
            case .nothing: _ = await wait(within: nil, isolation: isolation)
            }
        }
    }

    private enum Taken {
        case messages([WebSocketMessage])
        case nothing, closed
    }

    /// Every waiting message (`all`) or the oldest one; `.closed` once the connection closed cleanly and all was
    /// taken. Throws the connection's error once all was taken. Asks the loop to read again when the reader has taken
    /// enough.
    private func take(all: Bool) throws(WebSocketError) -> Taken {
        let (taken, wake): (Result<Taken, WebSocketError>, Bool) = state.withLock { s in
            guard s.count > 0 else {
                switch s.end {
                case nil: return (.success(.nothing), false)
                case .success: return (.success(.closed), false)
                case .failure(let e): return (.failure(e), false)
                }
            }
            let batch: [WebSocketMessage]
            if all {
                batch = Array(s.queue[s.head...])
                s.queue.removeAll(keepingCapacity: s.queue.capacity <= 4 * highWater)
                s.head = 0
                s.bytes = 0
            } else {
                batch = [s.queue[s.head]]
                s.head += 1
                s.bytes -= batch[0].count
                if s.head == s.queue.count {
                    s.queue.removeAll(keepingCapacity: true)
                    s.head = 0
                } else if s.head > 1024 && s.head * 2 > s.queue.count {
                    s.queue.removeFirst(s.head)
                    s.head = 0
                }
            }
            let wake = s.paused && drained(s)
            if wake { s.paused = false }
            return (.success(.messages(batch)), wake)
        }
        if wake { resumeHook.withLock { $0 }?.hook() }
        return try taken.get()
    }

    /// Waits until there is something to take or the end (`.ready`), or `timeout` passed (`.timedOut`).
    private func wait(within timeout: Duration?, isolation: isolated (any Actor)?) async -> Wake {
        await withCheckedContinuation(isolation: isolation) { continuation in
            let ready = state.withLock { s -> Bool in
                if s.count > 0 || s.end != nil { return true }
                s.waiter = continuation
                s.waits += 1
                if let timeout, let loop {
                    let ticket = s.waits
                    s.timer = loop.schedule(after: timeout) { [self] in expire(ticket) }
                }
                return false
            }
            if ready { continuation.resume(returning: .ready) }
        }
    }

    private func expire(_ ticket: Int) {
        let waiter = state.withLock { s -> CheckedContinuation<Wake, Never>? in
            guard s.waits == ticket else { return nil }
            return s.takeWaiter()?.continuation
        }
        waiter?.resume(returning: .timedOut)
    }

    public struct AsyncIterator: AsyncIteratorProtocol {
        let inbox: MessageInbox
        public mutating func next() async throws(WebSocketError) -> WebSocketMessage? {
            try await inbox.next(isolation: nil)
        }
        public mutating func next(
            isolation actor: isolated (any Actor)?
        ) async throws(WebSocketError) -> WebSocketMessage? {
            try await inbox.next(isolation: actor)
        }
    }

    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(inbox: self) }
}
