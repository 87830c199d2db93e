import Synchronization

/// A wake-up call for a sleeping worker: `signal()` from anywhere; `wait(upTo:)` returns at the first signal
/// (or one that came while it was not waiting), at the timeout, or when the task is cancelled, and says which.
public final class Wakeup: Sendable {
    private struct State {
        var pending = false
        var waiter: CheckedContinuation<Bool, Never>?
        /// Numbers each wait, so that the alarm of a wait that ended otherwise cannot end the next one.
        var round: UInt64 = 0
    }

    private let state = Mutex(State())
    private let clock: any Alarms

    public init(clock: any Alarms = AlarmClock.shared) {
        self.clock = clock
    }

    public func signal() {
        let waiter = state.withLock { s -> CheckedContinuation<Bool, Never>? in
            guard let w = s.waiter else {
                s.pending = true
                return nil
            }
            s.waiter = nil
            return w
        }
        waiter?.resume(returning: true)
    }

    /// A task waits here and nothing has signalled it since: what a quiescence check needs besides a "waiting" flag,
    /// which stays set for a moment after a signal, until the woken task runs.
    public var isParked: Bool { state.withLock { $0.waiter != nil } }

    /// `timeout` nil: only a signal (or the cancellation) ends the wait. `evenIfCancelled`: a cancelled task still
    /// waits (for a signal or the timeout) rather than returning at once.
    /// Returns false when the timeout ended the wait, true when a signal (or the cancellation) did.
    @discardableResult
    public func wait(upTo timeout: Duration?, evenIfCancelled: Bool = false) async -> Bool {
        // The timeout is an alarm on the process's one clock thread, not a task with a timer: a wait that a signal
        // ends (the usual case) costs no thread a wake-up. Only a timeout that ran out ends the wait; it leaves no
        // pending signal behind, or every next wait would return at once and the worker would spin.
        var alarm: AlarmClock.Alarm?
        let signalled = await withTaskCancellationHandler {
            await withCheckedContinuation { (c: CheckedContinuation<Bool, Never>) in
                let round = state.withLock { s -> UInt64? in
                    if s.pending || (Task.isCancelled && !evenIfCancelled) {
                        s.pending = false
                        return nil
                    }
                    s.waiter = c
                    s.round &+= 1
                    return s.round
                }
                guard let round else { return c.resume(returning: true) }
                alarm = timeout.map { timeout in clock.set(after: timeout) { [self] in timeUp(round) } }
            }
        } onCancel: {
            if !evenIfCancelled { self.signal() }
        }
        if let alarm { clock.cancel(alarm) }
        return signalled
    }

    private func timeUp(_ round: UInt64) {
        let waiter = state.withLock { s -> CheckedContinuation<Bool, Never>? in
            guard s.round == round, let w = s.waiter else { return nil }
            s.waiter = nil
            return w
        }
        waiter?.resume(returning: false)
    }
}
