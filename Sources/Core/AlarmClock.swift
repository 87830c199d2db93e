import CLinux
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
/// wake-ups per transaction. Here setting an alarm costs a lock and a heap insert, cancelling one a lock, and the
/// clock's thread wakes only when an alarm comes due: it sleeps on a timer (`timerfd`) that the thread setting an
/// earlier alarm, or cancelling the next one, moves itself, so a cancelled alarm wakes nobody.
public final class AlarmClock: Alarms, @unchecked Sendable {
    // @unchecked: every field is behind `mutex`, a pthread mutex; `timer` is a descriptor, safe from any thread.

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
    /// Armed for the next alarm's time (disarmed when there is none); the clock's thread sleeps reading it.
    private let timer: Int32
    /// A min-heap on `due`; a cancelled alarm is dropped from it when it reaches the top.
    private var heap: [Entry] = []
    private var actions: [UInt64: @Sendable () -> Void] = [:]
    private var nextId: UInt64 = 0

    /// A clock with a thread of its own named `name`, which lives as long as the process (tests use their own to
    /// count alarms and wake-ups).
    public init(name: String = "alarm-clock") {
        pthread_mutex_init(mutex, nil)
        // CLOCK_BOOTTIME: ContinuousClock's own on Linux (it counts a suspend).
        timer = timerfd_create(CLOCK_BOOTTIME, Int32(TFD_CLOEXEC))
        precondition(timer >= 0, "timerfd_create: \(String(cString: strerror(errno)))")
        OwnThread.startDetached(named: name) { self.ring() }  // the thread holds the clock for good
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
        // Only a new first alarm moves the timer.
        if heap[0].id == id { arm() }
        pthread_mutex_unlock(mutex)
        return Alarm(id: id)
    }

    @discardableResult
    public func set(after delay: Duration, _ action: @escaping @Sendable () -> Void) -> Alarm {
        set(at: .now + delay, action)
    }

    /// The alarm will not ring (if it has not already). When it was the next to ring, the timer is moved to the
    /// one after it (or stopped) here, so the clock's thread does not wake for it.
    public func cancel(_ alarm: Alarm) {
        pthread_mutex_lock(mutex)
        if actions.removeValue(forKey: alarm.id) != nil, heap.first?.id == alarm.id {
            dropCancelled()
            arm()
        }
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
            dropCancelled()
            if let top = heap.first, top.due <= .now {
                _ = pop()
                let action = actions.removeValue(forKey: top.id)
                pthread_mutex_unlock(mutex)
                action?()
                pthread_mutex_lock(mutex)
                continue
            }
            arm()
            pthread_mutex_unlock(mutex)
            // Until the timer's time, which another thread may move meanwhile (setting it again clears an expiry
            // not yet read, so a moved timer does not wake the thread at its old time).
            var expirations: UInt64 = 0
            _ = read(timer, &expirations, MemoryLayout<UInt64>.size)
            pthread_mutex_lock(mutex)
        }
    }

    /// The cancelled alarms at the top of the heap are dropped. Under `mutex`.
    private func dropCancelled() {
        while let top = heap.first, actions[top.id] == nil { _ = pop() }
    }

    /// The timer set for the first alarm's time, or stopped when there is none. Under `mutex`.
    private func arm() {
        var setting = itimerspec()  // all zero: stopped
        if let due = heap.first?.due {
            // At least a nanosecond: a zero value would stop the timer rather than ring it at once.
            let (seconds, attoseconds) = max(ContinuousClock.now.duration(to: due), .nanoseconds(1)).components
            setting.it_value = timespec(tv_sec: Int(seconds), tv_nsec: max(1, Int(attoseconds / 1_000_000_000)))
        }
        _ = timerfd_settime(timer, 0, &setting, nil)
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
