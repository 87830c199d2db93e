import Foundation
import StoreContract
import Synchronization

/// A worker's sends under way and their outcomes not yet written. Shared by the dispatcher, the send tasks and the
/// committer, each holding the lock for a moment only.
final class SendsInProgress: Sendable {
    struct Finished {
        let id: String
        let result: JobOutcome
    }

    private struct State {
        /// Taken and not yet written: the ledger still says pending, so they must not be taken again.
        var ids: Set<String> = []
        /// Children with an alert under way (chat sinks keep each child's order).
        var children: [String: String] = [:]
        var running = 0
        var finished: [Finished] = []
        var firstFinished = ContinuousClock.now
        var pausedUntil: Date?
        /// The pause is the destination's word (a 429's Retry-After), not our back-off after a failure.
        var throttled = false
        /// Failing since the first failed send after the last one that went through (nil: working).
        var failing: SinkHealth?
        /// The last send failed (retry, throttle, unavailable): one send at a time until one goes through.
        var probing = false
        var unavailable: String?
        var closed = false
        var abandoned = 0
        /// A send found the sink gone (410): the dispatcher reads the ledger's word on it before the next send.
        var switchedOff = false
        var dispatcher = Dispatcher.working
        var onFinish: (@Sendable () -> Void)?
    }

    /// What the dispatcher is doing: the committer reads whether it is drained, the settled check whether it waits.
    enum Dispatcher {
        case working
        /// Waits with nothing left due and every due delivery started.
        case drained
        /// Waits for a signal or a due time after a read that found nothing to start, or while switched off.
        case waiting
    }

    private let state = Mutex(State())

    /// Sends under way plus outcomes not yet written: what a kill -9 would send again. At most `concurrency`.
    var count: Int { state.withLock { $0.ids.count } }
    /// Sends cut short by a stop, left pending.
    var abandoned: Int { state.withLock { $0.abandoned } }
    var taken: (ids: Set<String>, children: Set<String>) { state.withLock { ($0.ids, Set($0.children.values)) } }
    var pausedUntil: Date? { state.withLock { $0.pausedUntil } }
    var isPaused: Bool { state.withLock { s in s.pausedUntil.map { $0 > Date() } ?? false } }
    var probing: Bool { state.withLock { $0.probing } }

    var onFinish: (@Sendable () -> Void)? {
        get { state.withLock { $0.onFinish } }
        set { state.withLock { $0.onFinish = newValue } }
    }

    func start(_ d: Delivery, child: String) {
        state.withLock { s in
            s.ids.insert(d.id)
            s.children[d.id] = child
            s.running += 1
        }
    }

    func finish(_ id: String, _ result: JobOutcome) {
        let wake = state.withLock { s in
            s.running -= 1
            if s.finished.isEmpty { s.firstFinished = .now }
            s.finished.append(Finished(id: id, result: result))
            return s.onFinish
        }
        wake?()
    }

    /// A send that ended without an outcome: its row is free at once (still pending in the ledger).
    func abandon(_ id: String) {
        let wake = state.withLock { s in
            s.running -= 1
            s.abandoned += 1
            s.ids.remove(id)
            s.children[id] = nil
            return s.onFinish
        }
        wake?()
    }

    /// The outcomes to write, whether this is the last batch (closed, nothing under way), and, while sends that
    /// will finish soon are still under way, how much longer to gather (up to `window`): one commit for the
    /// sends that went out together rather than one each.
    func takeFinished(gatheringFor window: Duration) -> (batch: [Finished], done: Bool, gather: Duration?) {
        state.withLock { s in
            let done = s.closed && s.running == 0
            guard !s.finished.isEmpty else { return ([], done, nil) }
            let waited = ContinuousClock.now - s.firstFinished
            if s.running > 0 && !s.closed && waited < window && s.finished.count < 64 {
                return ([], false, window - waited)
            }
            defer { s.finished = [] }
            return (s.finished, done, nil)
        }
    }

    /// Written: these rows may be taken again (a retry, once due).
    func release(_ ids: [String]) {
        state.withLock { s in
            for id in ids {
                s.ids.remove(id)
                s.children[id] = nil
            }
        }
    }

    func close() { state.withLock { $0.closed = true } }

    func switchOff() { state.withLock { $0.switchedOff = true } }

    var dispatcher: Dispatcher {
        get { state.withLock { $0.dispatcher } }
        set { state.withLock { $0.dispatcher = newValue } }
    }
    /// Waiting, with nothing under way and no outcome left to write: this worker sends nothing more until a row
    /// falls due or is planned.
    var isSettled: Bool {
        state.withLock { $0.dispatcher != .working && $0.ids.isEmpty && $0.running == 0 && $0.finished.isEmpty }
    }

    /// Whether a send found the sink switched off since the last call.
    func takeSwitchedOff() -> Bool {
        state.withLock { s in
            defer { s.switchedOff = false }
            return s.switchedOff
        }
    }

    func pause(until date: Date, throttled: Bool = false) {
        state.withLock { s in
            s.pausedUntil = max(s.pausedUntil ?? date, date)
            s.throttled = throttled
            s.probing = true
        }
    }

    /// A person asked for the waiting alerts now (`deliveries retry`): our back-off ends; a destination's own
    /// request to wait (a throttle) stands.
    func endBackOff() {
        state.withLock { s in
            if !s.throttled { s.pausedUntil = nil }
        }
    }

    /// The sink's failure as the ledger last recorded it (a restart goes on from there).
    func restore(_ failing: SinkHealth?) { state.withLock { $0.failing = failing } }

    /// Records a failed send; returns the health to write when it changed (the first failure, or another error).
    func failed(_ error: String, deadLetter: Bool, at now: Date) -> SinkHealth? {
        state.withLock { s in
            let next = SinkHealth(
                failingSince: s.failing?.failingSince ?? now, lastError: error, deadLettering: deadLetter)
            guard next != s.failing else { return nil }
            s.failing = next
            return next
        }
    }

    /// Records that the sink is unavailable; true the first time (said once, not at every retry).
    func unavailable(_ reason: String) -> Bool {
        state.withLock { s in
            defer { s.unavailable = reason }
            return s.unavailable == nil
        }
    }

    /// A send went through: how the sink had been failing, if it had (worth saying, and clearing in the ledger).
    func working() -> SinkHealth? {
        state.withLock { s in
            defer { (s.unavailable, s.probing, s.failing) = (nil, false, nil) }
            return s.failing
        }
    }
}
