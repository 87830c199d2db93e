import AllowanceAPI
import Foundation

/// One write waiting to reach the server.
public struct OutboxEntry: Sendable, Equatable {
    /// Where a write is in its life, stored as its raw value.
    public enum State: String, Sendable, CaseIterable {
        case pending
        case inFlight = "in_flight"
        /// The server took it; its transaction replaced the local one.
        case sent
        /// The server refused it for good (400/409/422...): undone here.
        case rejected
        /// Retried too often or for too long: undone here, kept for `outbox list`.
        case dead
    }

    public var seq: Int64
    public var idempotencyKey: String
    public var localTransactionId: UUID
    public var childId: UUID
    /// The amount in cents, as both stores keep it (checked whole when the write was queued: `OutboxCheck`).
    public var amountCents: Int64
    public var amount: Decimal { Money.decimal(cents: amountCents) }
    public var type: TransactionType
    public var description: String
    public var state: State
    public var attempts: Int
    public var lastError: String?
    public var createdAt: Date

    /// Every field, for another outbox's rows (the shared PostgreSQL one).
    public init(
        seq: Int64, idempotencyKey: String, localTransactionId: UUID, childId: UUID, amountCents: Int64,
        type: TransactionType, description: String,
        state: State, attempts: Int, lastError: String?, createdAt: Date
    ) {
        self.seq = seq
        self.idempotencyKey = idempotencyKey
        self.localTransactionId = localTransactionId
        self.childId = childId
        self.amountCents = amountCents
        self.type = type
        self.description = description
        self.state = state
        self.attempts = attempts
        self.lastError = lastError
        self.createdAt = createdAt
    }
}

/// What the sync engine needs of the outbox, and nothing more: the queue of writes behind one interface, as
/// `DeliveryLedger` is for the alerts, implemented by the SQLite file and by the database relays share.
public protocol OutboxQueue: Sendable {
    /// Writes due to be sent now, in the order they were made (a waiting write holds back the later ones of its child).
    func dueOutbox(at now: Date) throws(StoreError) -> [OutboxEntry]
    /// When the next retry of a waiting write is due (nil: none waits for a later time).
    func nextOutboxAttempt(after now: Date) throws(StoreError) -> Date?
    /// The backend is back: waiting writes are due now.
    @discardableResult func outboxDueNow(at now: Date) throws(StoreError) -> Int
    /// A write is being sent (a hub echo of it may come before the answer).
    func markInFlight(_ seq: Int64) throws(StoreError)
    /// The server took the write: its transaction replaces the local one.
    func outboxSent(_ seq: Int64, server: Transaction, at now: Date) throws(StoreError)
    /// A failure a retry may fix: pending again at `retryAt`.
    func outboxRetry(_ seq: Int64, error: String, retryAt: Date) throws(StoreError)
    /// Refused for good by the server: undone here.
    func outboxRejected(_ seq: Int64, reason: String, at now: Date) throws(StoreError)
    /// Given up (a dead letter): undone here, kept for `outbox list`.
    func outboxDead(_ seq: Int64, reason: String, at now: Date) throws(StoreError)
}

/// What a write must pass to wait in the outbox, the same on both stores: room in the outbox, a child the cache
/// knows, an amount above zero in whole cents, and a balance the debit does not overdraw.
public enum OutboxCheck {
    /// The write's amount in minor units, or why it cannot be queued. `balance`: the child's balance in minor units
    /// with the writes already waiting (nil: not in the cache).
    public static func check(
        child: UUID, amount: Decimal, type: TransactionType, balance: Int64?, waiting: Int, limit: Int
    ) -> Result<Int64, Refusal> {
        guard waiting < limit else {
            return .failure(
                Refusal(
                    "The outbox is full (\(limit) writes waiting). Wait until the backend is reachable and the relay has sent them, or raise outbox.limit."
                ))
        }
        guard let balance else {
            return .failure(
                Refusal("Child \(child) is not in the cache: run the relay once while the backend is reachable."))
        }
        guard let minor = Money.minorUnits(amount) else {
            return .failure(Refusal("The amount \(amount) has more than 2 decimal places or is out of range."))
        }
        guard minor > 0 else { return .failure(Refusal("The amount must be greater than 0.")) }
        guard (type == .credit ? balance + minor : balance - minor) >= 0 else {
            return .failure(
                Refusal(
                    "Insufficient funds: the balance is \(Money.plain(cents: balance)), the debit \(Money.plain(amount))."
                ))
        }
        return .success(minor)
    }

    public struct Refusal: Error, Sendable {
        public let message: String
        init(_ message: String) { self.message = message }
    }
}
