import AllowanceAPI
import Synchronization

/// Hub events between the connection's handler and the store. The handler only appends (it never waits for
/// SQLite), and the writer takes everything waiting at once: a burst is stored in one SQLite transaction, one
/// commit instead of one per event. An event still here at a crash is fetched again by the next catch-up.
/// Bounded: past `capacity` the handler waits, which holds the connection's receive loop and, through it, the
/// socket (back-pressure to the server instead of unbounded memory).
public final class EventQueue: Sendable {
    private struct State {
        var events: [HubEvent] = []
        var waiter: CheckedContinuation<Void, Never>?
        var producer: CheckedContinuation<Void, Never>?
        var finished = false
    }

    private let state = Mutex(State())
    private let capacity: Int

    public init(capacity: Int = 10_000) {
        self.capacity = capacity
    }

    /// From the hub handler, in arrival order (one producer).
    public func append(_ event: HubEvent) async {
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            let full = state.withLock { s -> Bool in
                guard s.events.count >= capacity, !s.finished else { return false }
                s.producer = c
                return true
            }
            if !full { c.resume() }
        }
        let waiter = state.withLock { s -> CheckedContinuation<Void, Never>? in
            s.events.append(event)
            defer { s.waiter = nil }
            return s.waiter
        }
        waiter?.resume()
    }

    /// No more events will come: `next` returns what is left, then nil.
    public func finish() {
        let (waiter, producer) = state.withLock { s -> (CheckedContinuation<Void, Never>?, CheckedContinuation<Void, Never>?) in
            s.finished = true
            defer {
                s.waiter = nil
                s.producer = nil
            }
            return (s.waiter, s.producer)
        }
        waiter?.resume()
        producer?.resume()
    }

    /// Up to `limit` waiting events, oldest first, once there is at least one; nil once finished and empty.
    public func next(limit: Int = 1000) async -> [HubEvent]? {
        while true {
            let (taken, producer) = state.withLock { s -> ([HubEvent]??, CheckedContinuation<Void, Never>?) in
                if !s.events.isEmpty {
                    let batch = Array(s.events.prefix(limit))
                    s.events.removeFirst(batch.count)
                    defer { s.producer = nil }
                    return (.some(batch), s.producer)
                }
                return (s.finished ? .some(nil) : nil, nil)
            }
            producer?.resume()
            if let taken { return taken }
            await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
                let now = state.withLock { s -> Bool in
                    if !s.events.isEmpty || s.finished { return true }
                    s.waiter = c
                    return false
                }
                if now { c.resume() }
            }
        }
    }
}
