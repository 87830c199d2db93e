import Core
import StoreContract
import Synchronization

/// Outcomes of sends waiting to go into the file with the next write's commit instead of a commit of their own (two
/// file locks, a log frame, and GRDB's BEGIN and COMMIT compiled afresh: BENCHMARKS.md, session 40). A send's row
/// stays taken until its outcome is written, so a `kill -9` meanwhile sends it again under the same id, as before.
final class CarriedOutcomes: Sendable {
    typealias Results = [(id: String, result: JobOutcome)]

    private struct Entry {
        var results: Results
        /// In a write whose commit has not yet happened.
        var inAWrite = false
        let wake: Wakeup
    }

    /// What became of the outcomes a caller left here.
    enum Claim {
        /// A write committed them.
        case written
        /// No write took them: the caller writes them itself.
        case yours(Results)
        /// A write holds them and has not committed yet: wait for it.
        case inAWrite
    }

    private let entries = Mutex<[UInt64: Entry]>([:])
    private let tickets = Atomic<UInt64>(0)

    func leave(_ results: Results, wake: Wakeup) -> UInt64 {
        let ticket = tickets.add(1, ordering: .relaxed).newValue
        entries.withLock { $0[ticket] = Entry(results: results, wake: wake) }
        return ticket
    }

    /// For a write about to commit: the outcomes no write holds yet, now held by it.
    func take() -> [(ticket: UInt64, results: Results)] {
        entries.withLock { entries in
            var taken: [(ticket: UInt64, results: Results)] = []
            // By index, marking each entry in place: a `for` over the dictionary holds a second reference to its
            // storage, and the first mark in the loop then copied the whole table.
            var index = entries.startIndex
            while index != entries.endIndex {
                if !entries.values[index].inAWrite {
                    entries.values[index].inAWrite = true
                    taken.append((entries.keys[index], entries.values[index].results))
                }
                entries.formIndex(after: &index)
            }
            return taken
        }
    }

    /// The write that held `taken` committed.
    func committed(_ taken: [UInt64]) {
        let wakes = entries.withLock { entries in taken.compactMap { entries.removeValue(forKey: $0)?.wake } }
        for wake in wakes { wake.signal() }
    }

    /// The write that held `taken` rolled back: their callers write them themselves.
    func rolledBack(_ taken: [UInt64]) {
        let wakes = entries.withLock { entries in
            taken.compactMap { ticket -> Wakeup? in
                entries[ticket]?.inAWrite = false
                return entries[ticket]?.wake
            }
        }
        for wake in wakes { wake.signal() }
    }

    /// Whether no outcome waits here (none left, or all written).
    var isEmpty: Bool { entries.withLock { $0.isEmpty } }

    func claim(_ ticket: UInt64) -> Claim {
        entries.withLock { entries in
            guard let entry = entries[ticket] else { return .written }
            if entry.inAWrite { return .inAWrite }
            entries[ticket] = nil
            return .yours(entry.results)
        }
    }
}
