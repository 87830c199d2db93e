/// The sync engine's coordination as a value, without I/O: one catch-up at a time (a request while one runs
/// asks for one more round, however many come), a catch-up's fetch and an outbox drain never at once (a write the
/// server applies between two of the fetch's requests would be in one half of its snapshot and not the other),
/// and nothing after the server's data contradicted the cache. `SyncCoordinator` performs what it decides;
/// `SyncMachineTests` drive it alone.
struct SyncMachine: Sendable, Equatable {
    enum CatchUp: Sendable, Equatable {
        case idle
        case running
        /// A request came during the round: one more round follows.
        case runningAgain
    }

    /// What holds the server's data at the moment.
    enum Work: Sendable, Equatable {
        case none
        case fetching
        case draining
    }

    enum Request: Sendable, Equatable {
        /// Start the catch-up loop.
        case start
        /// One runs: the request is one more round of it.
        case coalesced
        /// The cache conflicts with the server: nothing is fetched.
        case refused
    }

    private(set) var catchUp = CatchUp.idle
    private(set) var work = Work.none
    /// Set once, when the server's data contradicted the cache; `run --rebuild` starts over.
    private(set) var conflict: String?

    mutating func requestCatchUp() -> Request {
        guard conflict == nil else { return .refused }
        switch catchUp {
        case .idle:
            catchUp = .running
            return .start
        case .running, .runningAgain:
            catchUp = .runningAgain
            return .coalesced
        }
    }

    /// A round begins: a request from now on asks for another.
    mutating func roundBegins() {
        catchUp = .running
    }

    /// The fetch may begin; false while a drain holds the server's data (wait for its end, then ask again).
    mutating func beginFetch() -> Bool {
        guard work == .none else { return false }
        work = .fetching
        return true
    }

    mutating func endFetch() {
        if work == .fetching { work = .none }
    }

    /// A round has ended (`failed`: it will be retried after a back-off). True when another round follows.
    mutating func roundEnded(failed: Bool) -> Bool {
        if conflict == nil, failed || catchUp == .runningAgain {
            catchUp = .running
            return true
        }
        catchUp = .idle
        return false
    }

    /// An outbox drain may begin: not during a fetch or another drain (the catch-up drains when its fetch is
    /// done), nor after a conflict.
    mutating func beginDrain() -> Bool {
        guard work == .none, conflict == nil else { return false }
        work = .draining
        return true
    }

    mutating func endDrain() {
        if work == .draining { work = .none }
    }

    /// True the first time: then the conflict is said and alerted, once.
    mutating func enterConflict(_ message: String) -> Bool {
        guard conflict == nil else { return false }
        conflict = message
        return true
    }
}
