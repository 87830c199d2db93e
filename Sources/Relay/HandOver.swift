import Store
import Synchronization

/// The deliveries the planner has just committed for one sink, handed to its worker in memory, in order.
///
/// The ledger holds them too; this only spares a worker that has started everything due from reading them back
/// (at a family's pace, one read per alert). It is never the truth: the worker drops it before each read of the
/// ledger, and reads instead whenever something in it cannot go out as it is. It holds at most `limit` rows, so a
/// worker that is paused or busy while a burst is planned costs no memory: past the limit it forgets the rows
/// and the worker reads them from the ledger.
final class HandOver: Sendable {
    private struct State {
        var rows: [Delivery] = []
        var overflowed = false
    }

    private let state = Mutex(State())
    let limit: Int

    init(limit: Int = 256) {
        self.limit = limit
    }

    func put(_ new: [Delivery]) {
        state.withLock { s in
            guard !s.overflowed, s.rows.count + new.count <= limit else {
                (s.rows, s.overflowed) = ([], true)
                return
            }
            s.rows += new
        }
    }

    /// Everything handed over since the last take, or nil when some of it was forgotten (read the ledger).
    func take() -> [Delivery]? {
        state.withLock { s in
            defer { s = State() }
            return s.overflowed ? nil : s.rows
        }
    }
}
