import Core
import Synchronization

/// A clock the test moves: alarms ring, in order, when `advance` passes their time, on the test's own thread.
public final class HandClock: Alarms {
    public init() {}
    private struct State {
        var now: Duration = .zero
        var next: UInt64 = 0
        var set: [UInt64: (due: Duration, action: @Sendable () -> Void)] = [:]
    }
    private let state = Mutex(State())

    public func set(after delay: Duration, _ action: @escaping @Sendable () -> Void) -> AlarmClock.Alarm {
        state.withLock { s in
            s.next += 1
            s.set[s.next] = (s.now + delay, action)
            return AlarmClock.Alarm(id: s.next)
        }
    }

    public func cancel(_ alarm: AlarmClock.Alarm) { _ = state.withLock { $0.set.removeValue(forKey: alarm.id) } }

    public var pending: Int { state.withLock { $0.set.count } }

    public func advance(by delta: Duration) {
        let due = state.withLock { s in
            s.now += delta
            let due = s.set.filter { $0.value.due <= s.now }.sorted { $0.value.due < $1.value.due }
            for (id, _) in due { s.set[id] = nil }
            return due.map(\.value.action)
        }
        for ring in due { ring() }
    }
}
