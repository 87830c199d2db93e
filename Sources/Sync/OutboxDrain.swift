import AllowanceAPI
import Core
import Foundation
import Logging
import StoreContract

/// One pass over the writes waiting for the server, on any outbox (the SQLite file's, or the shared database's,
/// where each replica claims a child's oldest write): each sent with its Idempotency-Key, and its answer classified.
/// Retry later (408/429/5xx/network, honouring Retry-After; a 401 after the token source had its one fresh try),
/// or rejected for good (400/409/422 and other 4xx: the server wins). A write that failed `maxAttempts` times or is
/// older than `maxAge` is given up (dead letter) so it stops holding back the writes after it.
public struct OutboxDrain: Sendable {
    /// How a pass ended.
    public enum End: Sendable, Equatable {
        /// Nothing due is left.
        case emptied
        /// A write waits for a retry at `at` (the server is away or busy): the writes after it wait too.
        case waiting(at: Date, error: String)
        /// The outbox itself could not be read or written.
        case failed(String)
    }

    public let outbox: any OutboxQueue
    public let api: APIClient
    public let limits: SyncCoordinator.OutboxLimits
    public let logger: Logger
    /// A write that failed for a retryable reason goes again after about 2 s, 4 s, 8 s ... up to 5 minutes.
    static let backoff = Backoff(initial: .seconds(2), maximum: .seconds(300))

    public init(outbox: any OutboxQueue, api: APIClient, limits: SyncCoordinator.OutboxLimits, logger: Logger) {
        self.outbox = outbox
        self.api = api
        self.limits = limits
        self.logger = logger
    }

    /// Sends what is due, in order, until nothing due is left or a write must wait; how it ended and how many went.
    public func run() async -> (end: End, sent: Int) {
        var sent = 0
        do {
            // Again after each round: a shared outbox hands out one write per child at a time.
            while true {
                let due = try outbox.dueOutbox(at: Date())
                if due.isEmpty { return (.emptied, sent) }
                for entry in due {
                    switch try await send(entry) {
                    case .sent: sent += 1
                    case .settled: break
                    case .waiting(let at, let error): return (.waiting(at: at, error: error), sent)
                    }
                }
            }
        } catch {
            logger.error("outbox: \(error)")
            return (.failed("\(error)"), sent)
        }
    }

    private enum Step {
        case sent, settled
        case waiting(Date, String)
    }

    private func send(_ entry: OutboxEntry) async throws(StoreError) -> Step {
        if entry.attempts >= limits.maxAttempts || Date().timeIntervalSince(entry.createdAt) > limits.maxAge {
            let reason = "given up after \(entry.attempts) attempt(s): \(entry.lastError ?? "too old")"
            try outbox.outboxDead(entry.seq, reason: reason, at: Date())
            logger.error(
                "outbox write \(entry.seq) \(reason); its local effect is undone (`allowance-relay outbox retry \(entry.seq)` queues it again)"
            )
            return .settled
        }
        try outbox.markInFlight(entry.seq)
        let answer: Result<Transaction, APIError>
        do throws(APIError) {
            answer = .success(
                try await api.createTransaction(
                    child: entry.childId, amount: entry.amount, type: entry.type, description: entry.description,
                    idempotencyKey: entry.idempotencyKey))
        } catch {
            answer = .failure(error)
        }
        switch answer {
        case .success(let t):
            try outbox.outboxSent(entry.seq, server: t, at: Date())
            logger.info("outbox write sent", metadata: ["outbox": "\(entry.seq)", "transaction": "\(t.id.lowercased)"])
            return .sent
        case .failure(let error) where error.kind.isRetryable || error.kind == .unauthorized:
            let retry = Date().addingTimeInterval(
                Self.backoff.seconds(retry: entry.attempts + 1, serverAsked: error.retryAfter))
            try outbox.outboxRetry(entry.seq, error: error.message, retryAt: retry)
            return .waiting(retry, error.message)
        case .failure(let error):
            try outbox.outboxRejected(entry.seq, reason: error.message, at: Date())
            let what =
                error.kind == .conflict
                ? "conflicts with the server's data (the server wins)" : "was rejected by the server"
            logger.error("outbox write \(entry.seq) \(what): \(error.message); its local effect is undone")
            return .settled
        }
    }
}
