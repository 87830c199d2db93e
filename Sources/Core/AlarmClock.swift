import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// What sets and cancels alarms: the process's clock thread (`AlarmClock`), or a test's clock it moves by hand, so a
/// timeout is shown to end a wait without the test waiting it out.
public protocol Alarms: Sendable {
    @discardableResult
    func set(after delay: Duration, _ action: @escaping @Sendable () -> Void) -> AlarmClock.Alarm
    func cancel(_ alarm: AlarmClock.Alarm)
}

/// One thread that keeps every deadline of the process: a waiter's timeout, a gathering window.
///
/// A deadline made with `Task.sleep` costs a task, a libdispatch timer and, when the wait ends early (the usual
/// case: the event came), a timer that still fires later and wakes two threads for nothing. The relay makes a
/// deadline for every wait of every worker, so at a steady 20 transactions a second that was a dozen thread
/// wake-ups per transaction. Here, setting an alarm that is not the next one to ring costs a lock and a heap
/// insert, cancelling one costs a lock, and the clock's thread wakes only when an alarm it holds comes due.
public final class AlarmClock: Alarms, @unchecked Sendable {
    // @unchecked: every field is behind `mutex`, a pthread mutex (with `condition`, its condition variable).

    /// The process's clock, started at its first use.
    public static let shared = AlarmClock()

    public struct Alarm: Sendable, Hashable {
        public let id: UInt64
        public init(id: UInt64) { self.id = id }
    }

    private struct Entry {
        let due: ContinuousClock.Instant
        let id: UInt64
    }

    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let condition = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
    /// A min-heap on `due`; a cancelled alarm stays in it until it comes up, and is then skipped.
    private var heap: [Entry] = []
    private var actions: [UInt64: @Sendable () -> Void] = [:]
    private var nextId: UInt64 = 0
    /// When the thread will wake by itself (nil: it waits for a signal): a new alarm before this signals it.
    private var sleepingUntil: ContinuousClock.Instant?

    /// A clock with a thread of its own, which lives as long as the process (tests use their own to count alarms).
    public init() {
        pthread_mutex_init(mutex, nil)
        Self.initMonotonic(condition)
        OwnThread.startDetached(named: "alarm-clock") { self.ring() }  // the thread holds the clock for good
    }

    /// Calls `action` on the clock's thread at `due` (at once if it has passed), unless cancelled first. `action`
    /// must be short (resume a continuation, set a flag): every alarm rings on this one thread.
    @discardableResult
    public func set(at due: ContinuousClock.Instant, _ action: @escaping @Sendable () -> Void) -> Alarm {
        pthread_mutex_lock(mutex)
        nextId &+= 1
        let id = nextId
        actions[id] = action
        push(Entry(due: due, id: id))
        // Only an alarm before the thread's own wake-up needs it awake sooner.
        let wake = sleepingUntil.map { due < $0 } ?? true
        if wake { pthread_cond_signal(condition) }
        pthread_mutex_unlock(mutex)
        return Alarm(id: id)
    }

    @discardableResult
    public func set(after delay: Duration, _ action: @escaping @Sendable () -> Void) -> Alarm {
        set(at: .now + delay, action)
    }

    /// The alarm will not ring (if it has not already). Its slot in the heap is dropped when it comes up.
    public func cancel(_ alarm: Alarm) {
        pthread_mutex_lock(mutex)
        actions[alarm.id] = nil
        pthread_mutex_unlock(mutex)
    }

    /// How many alarms are set and not yet rung or cancelled.
    public var pending: Int {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return actions.count
    }

    private func ring() {
        pthread_mutex_lock(mutex)
        while true {
            // Cancelled alarms at the top are dropped without a wake-up of their own.
            while let top = heap.first, actions[top.id] == nil { _ = pop() }
            guard let top = heap.first else {
                sleepingUntil = nil
                pthread_cond_wait(condition, mutex)
                continue
            }
            let now = ContinuousClock.now
            if top.due > now {
                sleepingUntil = top.due
                var deadline = Self.monotonicDeadline(in: now.duration(to: top.due))
                pthread_cond_timedwait(condition, mutex, &deadline)
                continue
            }
            _ = pop()
            let action = actions.removeValue(forKey: top.id)
            sleepingUntil = nil
            pthread_mutex_unlock(mutex)
            action?()
            pthread_mutex_lock(mutex)
        }
    }

    /// A condition variable whose timed waits count on CLOCK_MONOTONIC (a change of the wall clock moves no deadline).
    static func initMonotonic(_ condition: UnsafeMutablePointer<pthread_cond_t>) {
        var attributes = pthread_condattr_t()
        pthread_condattr_init(&attributes)
        pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC)
        pthread_cond_init(condition, &attributes)
        pthread_condattr_destroy(&attributes)
    }

    /// CLOCK_MONOTONIC (the condition variable's clock) now plus `delay`, rounded up to the next nanosecond.
    static func monotonicDeadline(in delay: Duration) -> timespec {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        let (seconds, attoseconds) = delay.components
        var sec = now.tv_sec + Int(seconds)
        var nsec = now.tv_nsec + Int(attoseconds / 1_000_000_000) + 1
        if nsec >= 1_000_000_000 {
            sec += 1
            nsec -= 1_000_000_000
        }
        return timespec(tv_sec: sec, tv_nsec: nsec)
    }

    private func push(_ e: Entry) {
        heap.append(e)
        var i = heap.count - 1
        while i > 0 {
            let parent = (i - 1) / 2
            guard heap[i].due < heap[parent].due else { break }
            heap.swapAt(i, parent)
            i = parent
        }
    }

    private func pop() -> Entry {
        let top = heap[0]
        let last = heap.removeLast()
        guard !heap.isEmpty else { return top }
        heap[0] = last
        var i = 0
        while true {
            let (l, r) = (2 * i + 1, 2 * i + 2)
            var smallest = i
            if l < heap.count, heap[l].due < heap[smallest].due { smallest = l }
            if r < heap.count, heap[r].due < heap[smallest].due { smallest = r }
            if smallest == i { break }
            heap.swapAt(i, smallest)
            i = smallest
        }
        return top
    }
}
