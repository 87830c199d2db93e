import Synchronization

/// The bounded hand-off between a connection and the one consumer of its decoded events (a database writer, say).
///
/// The connection appends the events of the frames it read (up to 256 at a time, whole frames) and, while the
/// buffer holds `capacity` or more, waits: it stops
/// reading the WebSocket, libwebsockets stops reading the socket, and TCP holds the server back. So memory stays
/// bounded whatever the server sends, and nothing is dropped. The consumer takes everything waiting at once (a
/// burst), so a slow consumer catches up in large batches.
///
/// The hand-off's own methods are inlinable: specialised where the event type is known, they look up no generic
/// metadata at run time (`[Event]?`, the state's tuples), which took 1% of the relay's thread in a steady soak
/// (BENCHMARKS.md, session 58).
public final class HubEventBuffer<Event: Sendable>: Sendable {
    @usableFromInline struct State {
        @usableFromInline var events: [Event] = []
        @usableFromInline var head = 0
        @usableFromInline var consumer: CheckedContinuation<Void, Never>?
        @usableFromInline var producer: CheckedContinuation<Void, Never>?
        @usableFromInline var finished = false
        /// `next(within:)`: the number of the last wait with a deadline, and of the last one whose deadline passed.
        @usableFromInline var lingers = 0
        @usableFromInline var expired = 0
        @usableFromInline var count: Int { events.count - head }

        @usableFromInline init() {}
    }

    @usableFromInline let state = Mutex(State())
    public let capacity: Int

    public init(capacity: Int = 10_000) {
        self.capacity = max(1, capacity)
    }

    /// The producer waits for room (the buffer is full): the connection is not reading.
    public var isHoldingBackProducer: Bool { state.withLock { $0.producer != nil } }

    /// The consumer waits for events.
    public var hasWaitingConsumer: Bool { state.withLock { $0.consumer != nil } }

    /// How many events wait for the consumer.
    public var count: Int { state.withLock { $0.count } }

    /// Appends in order, after waiting while the buffer is full (one producer). After `finish`, appends are kept
    /// without waiting, for the consumer to drain. A wait stays on the caller's actor (the connection's loop).
    @inlinable public func append(contentsOf batch: [Event], isolation: isolated (any Actor)? = #isolation) async {
        guard !batch.isEmpty else { return }
        // The usual case takes the lock once and suspends nothing.
        while true {
            let (appended, consumer) = state.withLock { s -> (Bool, CheckedContinuation<Void, Never>?) in
                guard s.count < capacity || s.finished else { return (false, nil) }
                // An empty buffer (the consumer keeps up) takes the batch whole, without copying each event.
                if s.events.isEmpty { s.events = batch } else { s.events.append(contentsOf: batch) }
                defer { s.consumer = nil }
                return (true, s.consumer)
            }
            consumer?.resume()
            if appended { return }
            await withCheckedContinuation(isolation: isolation) { (c: CheckedContinuation<Void, Never>) in
                let full = state.withLock { s -> Bool in
                    guard s.count >= capacity, !s.finished else { return false }
                    s.producer = c
                    return true
                }
                if !full { c.resume() }
            }
        }
    }

    public func append(_ event: Event, isolation: isolated (any Actor)? = #isolation) async {
        await append(contentsOf: [event], isolation: isolation)
    }

    /// No more events will come: `next` returns what is left, then nil; a waiting producer goes on.
    public func finish() {
        let (consumer, producer) = state.withLock {
            s -> (CheckedContinuation<Void, Never>?, CheckedContinuation<Void, Never>?) in
            s.finished = true
            defer {
                s.consumer = nil
                s.producer = nil
            }
            return (s.consumer, s.producer)
        }
        consumer?.resume()
        producer?.resume()
    }

    /// Up to `limit` waiting events, oldest first, once there is at least one; nil once finished and empty.
    /// The wait stays on the caller's actor: a consumer on an actor is resumed there, not on a pool thread that then
    /// hops to it (two threads woken per hand-over instead of one).
    @inlinable public func next(limit: Int = 1000, isolation: isolated (any Actor)? = #isolation) async -> [Event]? {
        while true {
            if let taken = take(limit) { return taken }
            await waitForEvents(isolation: isolation)
        }
    }

    /// Like `next`, but waits at most `timeout` for the first event: [] when none came in time (a consumer that also
    /// has other work to look at). To keep an event with the one that follows it, use the decoder's `isFollowed`: the
    /// connection holds it on its own thread.
    public func next(
        limit: Int = 1000, within timeout: Duration, isolation: isolated (any Actor)? = #isolation
    ) async -> [Event]? {
        if let taken = take(limit) { return taken }
        let ticket = state.withLock { s -> Int in
            s.lingers += 1
            return s.lingers
        }
        // An alarm, not a task with a timer: the event usually comes first, and then nothing wakes for the deadline.
        let alarm = AlarmClock.shared.set(after: timeout) { [self] in expire(ticket) }
        defer { AlarmClock.shared.cancel(alarm) }
        while true {
            if let taken = take(limit) { return taken }
            if state.withLock({ $0.expired == ticket }) { return [] }
            await waitForEvents(unlessExpired: ticket, isolation: isolation)
        }
    }

    private func expire(_ ticket: Int) {
        let consumer = state.withLock { s -> CheckedContinuation<Void, Never>? in
            s.expired = ticket
            defer { s.consumer = nil }
            return s.consumer
        }
        consumer?.resume()
    }

    /// Takes up to `limit` events: nil when there are none yet, .some(nil) once finished and empty. Lets a producer
    /// waiting for room go on.
    @inlinable func take(_ limit: Int) -> [Event]?? {
        let (taken, producer) = state.withLock { s -> ([Event]??, CheckedContinuation<Void, Never>?) in
            guard s.count > 0 else { return (s.finished ? .some(nil) : nil, nil) }
            let end = min(s.events.count, s.head + limit)
            let batch: [Event]
            if s.head == 0 && end == s.events.count {
                batch = s.events  // everything waiting: handed over whole, without copying each event
                s.events = []
            } else {
                batch = Array(s.events[s.head..<end])
                s.head = end
                if s.head == s.events.count {
                    s.events.removeAll(keepingCapacity: s.events.capacity <= 4 * capacity)
                    s.head = 0
                } else if s.head > capacity {
                    s.events.removeFirst(s.head)
                    s.head = 0
                }
            }
            // The producer goes on once there is room again.
            guard s.count < capacity, let p = s.producer else { return (.some(batch), nil) }
            s.producer = nil
            return (.some(batch), p)
        }
        producer?.resume()
        return taken
    }

    /// Suspends until an event arrives, the buffer is finished, or the deadline of the wait `ticket` has passed.
    @inlinable func waitForEvents(unlessExpired ticket: Int? = nil, isolation: isolated (any Actor)?) async {
        await withCheckedContinuation(isolation: isolation) { (c: CheckedContinuation<Void, Never>) in
            let now = state.withLock { s -> Bool in
                if s.count > 0 || s.finished || s.expired == ticket { return true }
                s.consumer = c
                return false
            }
            if now { c.resume() }
        }
    }
}

/// How a connection turns the invocations of some targets into `Event`s for a `HubEventBuffer`.
public struct HubEventDecoder<Event: Sendable>: Sendable {
    /// The targets (case-insensitive). `read`, `readMessagePack` and `decode` are given a target as written here,
    /// whatever case the server wrote it in.
    public var targets: [String]
    /// From the arguments' JSON bytes, in one pass (`reader` is at the arguments array): the common form. nil leaves
    /// the message to `decode`.
    public let read: @Sendable (_ target: String, _ reader: inout JSONReader) -> Event?
    /// The same from MessagePack (`reader` is at the arguments array).
    public let readMessagePack: @Sendable (_ target: String, _ reader: inout MessagePackReader) -> Event?
    /// `read` and `readMessagePack` appending to the connection's staged events (false: nothing read). They are made
    /// in the inlinable `init`, where the caller's `Event` is a known type: the connection, generic over `Event`,
    /// would otherwise look up the metadata of `Event?` and `[Event]` at run time for every event it reads.
    @usableFromInline package let stage:
        @Sendable (_ target: String, _ reader: inout JSONReader, _ into: inout [Event]) -> Bool
    @usableFromInline package let stageMessagePack:
        @Sendable (_ target: String, _ reader: inout MessagePackReader, _ into: inout [Event]) -> Bool
    /// From the parsed arguments, with every check and the exact error (which goes to `onError`; the message is
    /// skipped and the connection carries on).
    public var decode: @Sendable (_ target: String, _ arguments: HubArguments) throws -> Event
    public var onError: @Sendable (_ target: String, _ error: any Error) -> Void
    /// True for an event the server sends right before another that belongs with it (an order before its invoice,
    /// say): when such an event ends what was read, the connection holds it up to `followerWait` for the next frame,
    /// so that both reach the buffer in one hand-over (and its consumer handles them together). The wait is the
    /// connection's loop's own timer.
    public var isFollowed: @Sendable (Event) -> Bool
    public var followerWait: Duration

    @inlinable public init(
        targets: [String],
        read: @escaping @Sendable (_ target: String, _ reader: inout JSONReader) -> Event? = { _, _ in nil },
        readMessagePack: @escaping @Sendable (_ target: String, _ reader: inout MessagePackReader) -> Event? = { _, _ in
            nil
        },
        decode: @escaping @Sendable (_ target: String, _ arguments: HubArguments) throws -> Event,
        onError: @escaping @Sendable (_ target: String, _ error: any Error) -> Void,
        isFollowed: @escaping @Sendable (Event) -> Bool = { _ in false }, followerWait: Duration = .zero
    ) {
        self.targets = targets
        self.read = read
        self.readMessagePack = readMessagePack
        self.stage = { target, reader, staged in
            guard let event = read(target, &reader) else { return false }
            staged.append(event)
            return true
        }
        self.stageMessagePack = { target, reader, staged in
            guard let event = readMessagePack(target, &reader) else { return false }
            staged.append(event)
            return true
        }
        self.decode = decode
        self.onError = onError
        self.isFollowed = isFollowed
        self.followerWait = followerWait
    }
}
