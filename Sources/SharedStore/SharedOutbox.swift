import AllowanceAPI
import Core
import Foundation
import PostgresTransport
import StoreContract

/// The outbox on the shared database: writes made with `transaction add`, sent by whichever replica claims them.
/// A replica claims only a child's oldest waiting write, so two replicas never send one child's writes out of order;
/// the next one becomes claimable once that one is settled. Claims are renewed and expire like the deliveries'.
/// Unlike the SQLite file's, no optimistic local transaction is kept: the server's own arrives by the hub or the
/// next catch-up.
extension SharedRelayStore: OutboxQueue {
    static let outboxTable = PostgresMigration(
        3, "outbox",
        """
        CREATE TABLE relay_outbox (
            seq bigserial PRIMARY KEY, idempotency_key text NOT NULL UNIQUE, child_id text NOT NULL,
            amount_minor bigint NOT NULL, type text NOT NULL, description text NOT NULL, state text NOT NULL DEFAULT 'pending',
            attempts integer NOT NULL DEFAULT 0, last_error text, due_at timestamptz NOT NULL DEFAULT now(),
            claimed_by text, claim_expires_at timestamptz, created_at timestamptz NOT NULL DEFAULT now(), sent_transaction text);
        CREATE INDEX relay_outbox_waiting ON relay_outbox (child_id, seq) WHERE state IN ('pending', 'in_flight')
        """)

    /// The channel a new or retried write notifies.
    public static let outboxChannel = "relay_outbox"

    /// Queues a write (`transaction add`): refused when `limit` writes wait, the child is unknown, or a debit
    /// exceeds the cached balance less the debits already waiting. Wakes the replicas.
    public func enqueueTransaction(
        child: UUID, amount: Decimal, type: TransactionType, description: String, limit: Int = 100,
        at now: Date = Date()
    ) throws(StoreError) -> OutboxEntry {
        let key = UUID().uuidString.lowercased()
        let outcome = try writing { db throws(PostgresError) -> Result<Int64, StoreError> in
            try db.transaction { () throws(PostgresError) -> Result<Int64, StoreError> in
                // One write at a time per child, so that two commands cannot both spend the same balance.
                let row = try db.query(
                    "SELECT balance_minor FROM relay_child WHERE id = $1 FOR UPDATE", [child.lowercased]
                ).rows.first
                let waiting =
                    Int(
                        try db.query("SELECT count(*) FROM relay_outbox WHERE state IN ('pending', 'in_flight')").scalar
                            ?? "") ?? 0
                // The balance with the writes already waiting: a debit must not overdraw it once they are sent.
                let pending =
                    Int64(
                        try db.query(
                            "SELECT coalesce(sum(CASE WHEN type = 'Credit' THEN amount_minor ELSE -amount_minor END), 0) FROM relay_outbox WHERE child_id = $1 AND state IN ('pending', 'in_flight')",
                            [child.lowercased]
                        ).scalar ?? "") ?? 0
                let balance = row?[0].flatMap { Int64($0) }.map { $0 + pending }
                let minor: Int64
                switch OutboxCheck.check(
                    child: child, amount: amount, type: type, balance: balance, waiting: waiting, limit: limit)
                {
                case .success(let value): minor = value
                case .failure(let refusal): return .failure(StoreError(path: location.description, refusal.message))
                }
                let seq =
                    try db.query(
                        """
                        INSERT INTO relay_outbox (idempotency_key, child_id, amount_minor, type, description, created_at, due_at)
                        VALUES ($1, $2, $3, $4, $5, $6::timestamptz, $6::timestamptz) RETURNING seq
                        """, [key, child.lowercased, String(minor), type.rawValue, description, ISODate.string(now)]
                    ).scalar.flatMap { Int64($0) } ?? 0
                try db.notify(Self.outboxChannel)
                return .success(seq)
            }
        }
        let seq = try outcome.get()
        return OutboxEntry(
            seq: seq, idempotencyKey: key, localTransactionId: UUID(), childId: child, amount: amount, type: type,
            description: description,
            state: .pending, attempts: 0, lastError: nil, createdAt: now)
    }

    /// Every write, oldest first (the sent ones too).
    public func outbox() throws(StoreError) -> [OutboxEntry] {
        try writing { db throws(PostgresError) -> [OutboxEntry] in
            try db.query("SELECT \(Self.outboxColumns()) FROM relay_outbox ORDER BY seq").rows.compactMap(
                Self.outboxEntry)
        }
    }

    public func dueOutbox(at now: Date) throws(StoreError) -> [OutboxEntry] {
        try working { db throws(PostgresError) -> [OutboxEntry] in
            try db.query(
                """
                WITH heads AS (
                  SELECT DISTINCT ON (child_id) seq, state, due_at, claim_expires_at FROM relay_outbox
                  WHERE state IN ('pending', 'in_flight') ORDER BY child_id, seq),
                picked AS (
                  SELECT o.seq FROM relay_outbox o JOIN heads h ON h.seq = o.seq
                  WHERE (h.state = 'pending' AND h.due_at <= $1::timestamptz) OR (h.state = 'in_flight' AND h.claim_expires_at < now())
                  FOR UPDATE OF o SKIP LOCKED)
                UPDATE relay_outbox AS o SET state = 'in_flight', claimed_by = $2,
                  claim_expires_at = now() + make_interval(secs => $3::float8)
                FROM picked WHERE o.seq = picked.seq
                RETURNING \(Self.outboxColumns("o"))
                """, [ISODate.string(now), replica, String(Self.claimFor.inSeconds)]
            ).rows.compactMap(Self.outboxEntry).sorted { $0.seq < $1.seq }
        }
    }

    public func nextOutboxAttempt(after now: Date) throws(StoreError) -> Date? {
        try working { db throws(PostgresError) -> Date? in
            // A retry falling due, or another replica's claim running out (it was killed).
            let row = try db.query(
                """
                SELECT extract(epoch FROM (SELECT min(due_at) FROM relay_outbox WHERE state = 'pending' AND due_at > $1::timestamptz)),
                       extract(epoch FROM (SELECT min(claim_expires_at) FROM relay_outbox WHERE state = 'in_flight' AND claimed_by <> $2) - now())
                """, [ISODate.string(now), replica]
            ).rows.first
            let due = row?[0].flatMap(Double.init).map(Date.init(timeIntervalSince1970:))
            let expiry = row?[1].flatMap(Double.init).map { Date().addingTimeInterval(max(0, $0) + 0.05) }
            return [due, expiry].compactMap { $0 }.min()
        }
    }

    @discardableResult
    public func outboxDueNow(at now: Date) throws(StoreError) -> Int {
        try working { db throws(PostgresError) -> Int in
            try db.query(
                "UPDATE relay_outbox SET due_at = $1::timestamptz WHERE state = 'pending' AND due_at > $1::timestamptz",
                [ISODate.string(now)]
            ).affected
        }
    }

    /// Claimed already by `dueOutbox`.
    public func markInFlight(_ seq: Int64) throws(StoreError) {}

    public func outboxSent(_ seq: Int64, server: Transaction, at now: Date) throws(StoreError) {
        try settle(seq, "state = 'sent', last_error = NULL, sent_transaction = $3", [server.id.lowercased])
    }

    public func outboxRetry(_ seq: Int64, error: String, retryAt: Date) throws(StoreError) {
        try settle(
            seq, "state = 'pending', last_error = $3, due_at = $4::timestamptz", [error, ISODate.string(retryAt)])
    }

    public func outboxRejected(_ seq: Int64, reason: String, at now: Date) throws(StoreError) {
        try settle(seq, "state = 'rejected', last_error = $3", [reason])
    }

    public func outboxDead(_ seq: Int64, reason: String, at now: Date) throws(StoreError) {
        try settle(seq, "state = 'dead', last_error = $3", [reason], attempted: false)
    }

    /// An outcome, where the claim is still this replica's; the next write of the child becomes claimable.
    private func settle(_ seq: Int64, _ set: String, _ more: [String?], attempted: Bool = true) throws(StoreError) {
        try working { db throws(PostgresError) in
            try db.transaction { () throws(PostgresError) in
                try db.query(
                    """
                    UPDATE relay_outbox SET \(set), attempts = attempts + \(attempted ? 1 : 0), claimed_by = NULL, claim_expires_at = NULL
                    WHERE seq = $1 AND claimed_by = $2 AND state = 'in_flight'
                    """, [String(seq), replica] + more)
                try db.notify(Self.outboxChannel)
            }
        }
    }

    static func outboxColumns(_ table: String = "") -> String {
        let t = table.isEmpty ? "" : table + "."
        return """
            \(t)seq, \(t)idempotency_key, \(t)child_id, \(t)amount_minor, \(t)type, \(t)description, \(t)state, \(t)attempts, \(t)last_error,
            extract(epoch FROM \(t)created_at)
            """
    }

    static func outboxEntry(_ row: [String?]) -> OutboxEntry? {
        guard let seq = row[0].flatMap({ Int64($0) }), let child = row[2].flatMap(UUID.init(uuidString:)),
            let minor = row[3].flatMap({ Int64($0) }),
            let type = row[4].flatMap(TransactionType.init(rawValue:)),
            let state = row[6].flatMap(OutboxEntry.State.init(rawValue:))
        else { return nil }
        return OutboxEntry(
            seq: seq, idempotencyKey: row[1] ?? "", localTransactionId: UUID(), childId: child,
            amount: Money.decimal(cents: minor), type: type,
            description: row[5] ?? "", state: state, attempts: Int(row[7] ?? "") ?? 0, lastError: row[8],
            createdAt: row[9].flatMap(Double.init).map(Date.init(timeIntervalSince1970:)) ?? .distantPast)
    }
}
