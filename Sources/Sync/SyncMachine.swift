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

    /// Whether work on the server's data may begin now.
    enum Access: Sendable, Equatable {
        case granted
        /// The other kind of work holds the server's data, or a drain already runs: wait for its end (a fetch), or
        /// leave it to that work (a drain).
        case busy
        /// The cache conflicts with the server: nothing is sent.
        case refused
    }

    /// After a catch-up round.
    enum AfterRound: Sendable, Equatable {
        /// It failed (then after a back-off), or a request came during it: another round.
        case again
        case done
    }

    /// What a conflict found is to the engine.
    enum Conflict: Sendable, Equatable {
        /// The first: say it and alert it, once.
        case new
        /// One is known already: nothing more to say.
        case known
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

    /// The fetch may begin, or a drain holds the server's data (wait for its end, then ask again).
    mutating func beginFetch() -> Access {
        guard work == .none else { return .busy }
        work = .fetching
        return .granted
    }

    mutating func endFetch() {
        if work == .fetching { work = .none }
    }

    /// A round has ended (`failed`: it will be retried after a back-off).
    mutating func roundEnded(failed: Bool) -> AfterRound {
        if conflict == nil, failed || catchUp == .runningAgain {
            catchUp = .running
            return .again
        }
        catchUp = .idle
        return .done
    }

    /// An outbox drain may begin: not during a fetch or another drain (the catch-up drains when its fetch is
    /// done), nor after a conflict.
    mutating func beginDrain() -> Access {
        guard conflict == nil else { return .refused }
        guard work == .none else { return .busy }
        work = .draining
        return .granted
    }

    mutating func endDrain() {
        if work == .draining { work = .none }
    }

    mutating func enterConflict(_ message: String) -> Conflict {
        guard conflict == nil else { return .known }
        conflict = message
        return .new
    }
}
