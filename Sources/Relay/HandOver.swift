import StoreContract
import Synchronization

/// The deliveries the planner has just committed for one sink, handed to its worker in memory, in order.
///
/// The ledger holds them too; this only spares a worker that has started everything due from reading them back
/// (at a family's pace, one read per alert). It is never the truth: the worker drops it before each read of the
/// ledger, and reads instead whenever something in it cannot go out as it is. It holds at most `limit` rows, so a
/// worker that is paused or busy while a burst is planned costs no memory: past the limit it forgets the rows
/// and the worker reads them from the ledger. `forget()` asks for that read too (an outcome that was not a success
/// leaves a row for later that only the ledger knows of).
final class HandOver: Sendable {
    private struct State {
        var rows: [Delivery] = []
        /// Something since the last take is not in `rows`: the worker must read the ledger.
        var incomplete = false
    }

    private let state = Mutex(State())
    let limit: Int

    init(limit: Int = 256) {
        self.limit = limit
    }

    func put(_ new: [Delivery]) {
        state.withLock { s in
            guard !s.incomplete, s.rows.count + new.count <= limit else {
                (s.rows, s.incomplete) = ([], true)
                return
            }
            s.rows += new
        }
    }

    /// The next take says: read the ledger.
    func forget() { state.withLock { s in (s.rows, s.incomplete) = ([], true) } }

    /// Everything handed over since the last take, or nil when the ledger must be read instead.
    func take() -> [Delivery]? {
        state.withLock { s in
            defer { s = State() }
            return s.incomplete ? nil : s.rows
        }
    }
}
