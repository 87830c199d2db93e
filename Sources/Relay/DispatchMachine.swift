import Foundation
import StoreContract

/// A sink worker's dispatch as a value, without I/O: which due rows to start, and when to look at the ledger or
/// wait, from what the ledger and the planner said last. `SinkWorker` performs the reads, the waits and the sends
/// it asks for; `DispatchMachineTests` drive it alone.
///
/// Due rows are read in batches into `queue` (only this worker changes a pending row of its sink, so a batch stays
/// true until sent). When a read found every due row and all of them have started, the worker is drained: nothing
/// else is due before a signal (a planner's commit, a written outcome) or the next due time, so it waits for one
/// instead of asking the ledger again at once, and after that wait the rows the planner handed over may be all that
/// is new.
struct DispatchMachine {
    /// How many due deliveries one read takes, unless the sink says fewer.
    static let batch = 256
    /// A switched-off sink is looked up again this often: `deliveries enable` in another process cannot wake us.
    static let switchedOffLookEvery: Duration = .seconds(60)

    /// Whether the sink keeps one child's alerts in order (a chat): one send per child at a time.
    let ordersByChild: Bool
    /// Due rows read and not started yet.
    private(set) var queue: [Delivery] = []
    /// What the worker knows of the ledger beyond the queue: one of these at a time.
    private var phase = Phase.unknown
    /// When the first row not yet due falls due, as of the last read (nil: none waits).
    private(set) var nextDue: Date?
    /// Whether the sink is switched off, as last read, and when.
    private(set) var switchedOff: (reason: String?, readAt: ContinuousClock.Instant)?
    /// The ids of the last read's due rows: a row committed just before that read may also be handed over.
    private var lastRead: Set<String> = []

    private enum Phase: Equatable {
        /// Rows may be due that the queue does not hold: an empty queue means look.
        case unknown
        /// The ledger was read just now (`complete`: every due row was in it): an empty queue means nothing is due,
        /// not that everything due has started.
        case justRead(complete: Bool)
        /// The last read found every due row (fewer than a batch), or the hand-over was all that was new: once the
        /// queue has started, wait for a signal or the next due time.
        case drained
        /// The drained wait has just ended (`bySignal`: a signal ended it, not its time): what the planner handed
        /// over meanwhile may be all that is new.
        case wokeDrained(bySignal: Bool)
    }

    /// Every due row known has started or is in the queue: the next empty queue is a drained wait.
    var drained: Bool { phase == .drained }

    /// How many due deliveries one read takes (`readLimit` rows read means more may be due).
    let readLimit: Int

    init(ordersByChild: Bool, readLimit: Int = Self.batch) {
        self.ordersByChild = ordersByChild
        self.readLimit = readLimit
    }

    /// The sends under way: their rows' ids and their children.
    struct InProgress {
        var ids: Set<String> = []
        var children: Set<String> = []
        var count: Int { ids.count }
    }

    enum Step: Equatable {
        /// The sink is paused (a throttle, a retry after a failure): wait until then or a signal.
        case paused(until: Date)
        /// No room for another send: wait for an outcome (at most a minute).
        case full
        /// Everything due has started: wait, idle, until the next due time or a signal; then `wokeFromDrainedWait`.
        case drainedWait(nextDue: Date?)
        /// The queue is empty: look at the sink's switch (when `readSwitchedOff`, or a send just found the sink
        /// gone) and take the planner's hand-over, then `looked`.
        case look(readSwitchedOff: Bool)
        /// Start these sends; they are off the queue.
        case start([Delivery])
        /// Nothing can start now: wait until the time (nil: a minute) or a signal.
        case wait(until: Date?)
    }

    /// What to do next. `room`: how many more sends may run.
    mutating func step(
        now: Date, clock: ContinuousClock.Instant, pausedUntil: Date?, room: Int, inProgress: InProgress
    ) -> Step {
        var afterRead = false
        if case .justRead(let complete) = phase {
            afterRead = true
            phase = complete ? .drained : .unknown
        }
        if let pausedUntil, pausedUntil > now {
            queue = []
            return sleeping(.paused(until: pausedUntil))
        }
        guard room > 0 else { return sleeping(.full) }
        if queue.isEmpty && !afterRead {
            if phase == .drained {
                phase = .unknown
                return .drainedWait(nextDue: nextDue)
            }
            let stale = switchedOff.map { clock - $0.readAt >= Self.switchedOffLookEvery } ?? true
            return .look(readSwitchedOff: stale)
        }
        return startable(room: room, inProgress: inProgress)
    }

    /// The drained wait is over (`bySignal`: a signal ended it, not the timeout): what the planner hands over next
    /// may be all that is new.
    mutating func wokeFromDrainedWait(bySignal: Bool) {
        phase = .wokeDrained(bySignal: bySignal)
    }

    enum Look: Equatable {
        /// The sink is switched off: wait (a minute) for `deliveries enable`.
        case switchedOff(reason: String)
        /// The rows handed over are all that is new, each due and sendable as it is: they are the queue now (none:
        /// the signal was a written outcome's, and the worker is still drained).
        case handedOver
        /// Read the ledger's due rows (`excluding` the sends under way), fold them, then `read`.
        case readLedger
    }

    /// After a `look`: `switchedOffRead` is the switch as just read (nil: not read this time), `handedOver` what the
    /// planner handed over since the last look (nil: nothing).
    mutating func looked(
        switchedOffRead: String??, at clock: ContinuousClock.Instant, handedOver: [Delivery]?, inProgress: InProgress,
        now: Date
    ) -> Look {
        if let read = switchedOffRead { switchedOff = (read, clock) }
        if let reason = switchedOff?.reason {
            forgetDrained()
            return .switchedOff(reason: reason)
        }
        guard case .wokeDrained(let bySignal) = phase, let handedOver else {
            phase = .unknown
            return .readLedger
        }
        phase = .unknown
        // Nothing handed over and nothing fallen due, woken by a signal: an outcome written just before the drained
        // wait began (all sends through), or one of a sink's own signals that need no read. A signal that asks for
        // the ledger (`lookAtTheLedger`, a planner's overflow, a retry) leaves the hand-over incomplete (nil).
        if handedOver.isEmpty, bySignal, nextDue.map({ $0 > now }) ?? true {
            phase = .drained
            return .handedOver
        }
        if let fresh = usable(handedOver, known: [lastRead, inProgress.ids], at: now) {
            queue = fresh
            phase = .drained
            return .handedOver
        }
        return .readLedger
    }

    /// The ledger's answer: `due` as read (at most a batch), `folded` as they go out (digests folded), and when the
    /// first of the others falls due.
    mutating func read(due: [Delivery], folded: [Delivery], next: Date?) {
        lastRead = Set(due.map(\.id))
        queue = folded
        nextDue = next
        phase = .justRead(complete: due.count < readLimit)
    }

    /// What can start from the queue with `room`: the oldest first; for a chat, one per child that has no send
    /// under way. Nothing can: a wait until the next due time (or a minute, while sends run or rows wait).
    private mutating func startable(room: Int, inProgress: InProgress) -> Step {
        var ready: [Delivery] = []
        if ordersByChild {
            var seen = inProgress.children
            for d in queue where ready.count < room && seen.insert(Self.childKey(d)).inserted { ready.append(d) }
        } else {
            ready = Array(queue.prefix(room))
        }
        if ready.isEmpty {
            return sleeping(.wait(until: inProgress.count > 0 || !queue.isEmpty ? nil : nextDue))
        }
        if ready.count == queue.count {
            queue = []
        } else if ordersByChild {
            let started = Set(ready.map(\.id))
            queue.removeAll { started.contains($0.id) }
        } else {
            queue.removeFirst(ready.count)
        }
        return .start(ready)
    }

    /// The sends of a `start` stopped part-way (a stop, or the sink paused meanwhile): what was left is dropped.
    mutating func startInterrupted() {
        queue = []
        forgetDrained()
    }

    /// A read or a write failed: the queue is dropped and the worker waits a moment.
    mutating func failed() {
        queue = []
        forgetDrained()
    }

    /// Every wait but the drained one forgets `drained`: what it waited for (an outcome, a pause, a retry's time)
    /// may leave rows due that the last read did not see.
    private mutating func sleeping(_ step: Step) -> Step {
        forgetDrained()
        return step
    }

    private mutating func forgetDrained() {
        phase = .unknown
    }

    /// The handed-over rows that the worker does not know yet, when each can go out as it is: nil when none came, or
    /// when one needs the ledger (not due yet, in quiet hours, or part of a digest that folds rows together).
    private func usable(_ handedOver: [Delivery], known: [Set<String>], at now: Date) -> [Delivery]? {
        let fresh = handedOver.filter { d in !known.contains { $0.contains(d.id) } }
        guard !fresh.isEmpty, fresh.allSatisfy({ $0.nextAttemptAt <= now && !Self.foldable($0) }) else { return nil }
        return fresh
    }

    /// A delivery that a digest may take in with others of its child.
    static func foldable(_ d: Delivery) -> Bool { d.digest && d.kind == .transactionCreated && d.childId != nil }

    /// The key a chat orders by: the child (or none).
    static func childKey(_ d: Delivery) -> String { d.childId?.lowercased ?? "-" }
}
