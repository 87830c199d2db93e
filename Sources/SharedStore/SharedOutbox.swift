import Alerts
import AllowanceAPI
import Core
import Foundation
import PostgresTransport
import StoreContract

/// The outbox on the shared database: writes made with `transaction add`, sent by whichever replica claims them.
/// A replica claims only a child's oldest waiting write, so two replicas never send one child's writes out of order;
/// the next one becomes claimable once that one is settled. Claims are renewed and expire like the deliveries'.
/// As on the SQLite file, each write keeps an optimistic local transaction (origin `local-pending`) and its effect on
/// the child's balance until the server's copy replaces it, or it is refused and undone.
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

    /// Queues a write (`transaction add`) with its local transaction and its effect on the balance, in one
    /// transaction: refused as `OutboxCheck` says (a full outbox, an unknown child, an overdraft). Wakes the replicas.
    public func enqueueTransaction(
        child: UUID, amount: Decimal, type: TransactionType, description: String, limit: Int = 100,
        at now: Date = Date()
    ) throws(StoreError) -> OutboxEntry {
        let key = UUID.random().lowercased
        let localId = UUID()
        let outcome = try writing { db throws(PostgresError) -> Result<(seq: Int64, minor: Int64), StoreError> in
            try db.transaction { () throws(PostgresError) -> Result<(seq: Int64, minor: Int64), StoreError> in
                // The child's row locked: two commands cannot both spend the same balance.
                let row = try lockedChild(db, child)
                let waiting =
                    Int(
                        try db.query("SELECT count(*) FROM relay_outbox WHERE state IN ('pending', 'in_flight')").scalar
                            ?? "") ?? 0
                let minor: Int64
                switch OutboxCheck.check(
                    child: child, amount: amount, type: type, balance: row?.balance, waiting: waiting, limit: limit)
                {
                case .success(let value): minor = value
                case .failure(let refusal): return .failure(StoreError(path: location.description, refusal.message))
                }
                let after = (row?.balance ?? 0) + (type == .credit ? minor : -minor)
                let local = Transaction(
                    id: localId, childId: child, amount: amount, type: type, description: description,
                    balanceAfter: Money.decimal(cents: after), createdAt: now, createdByName: "allowance-relay")
                _ = try insert(
                    db, local, amount: minor, balanceAfter: after, via: "local", origin: "local-pending", now: now)
                try setBalance(db, child, after, now)
                let seq =
                    try db.query(
                        """
                        INSERT INTO relay_outbox (idempotency_key, child_id, amount_minor, type, description, created_at, due_at,
                                                  local_txn_id)
                        VALUES ($1, $2, $3, $4, $5, $6::timestamptz, $6::timestamptz, $7) RETURNING seq
                        """,
                        [
                            key, child.lowercased, String(minor), type.rawValue, description, ISODate.string(now),
                            localId.lowercased,
                        ]
                    ).scalar.flatMap { Int64($0) } ?? 0
                try db.notify(Self.outboxChannel)
                return .success((seq, minor))
            }
        }
        let (seq, minor) = try outcome.get()
        return OutboxEntry(
            seq: seq, idempotencyKey: key, localTransactionId: localId, childId: child, amountCents: minor, type: type,
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
        let due = try working { db throws(PostgresError) -> [OutboxEntry] in
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
        return claimed(due)
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

    /// The server took the write: its transaction replaces the local one (and its alert is planned here, with the
    /// balance before it as the server had it), unless the hub or a catch-up brought it first.
    public func outboxSent(_ seq: Int64, server: Transaction, at now: Date) throws(StoreError) {
        try settle(seq) { (db, entry) throws(PostgresError) in
            try db.query(
                "UPDATE relay_outbox SET state = 'sent', last_error = NULL, sent_transaction = $2 WHERE seq = $1",
                [String(seq), server.id.lowercased])
            let standInRemoved = try dropLocal(db, entry) > 0
            var kept: TransactionCents?
            switch HubEventPolicy.keeping(server, now: now) {
            case .setAside(let row):
                if try setAside(db, row, now: now, traceParent: nil).planned > 0 { try db.notify(Self.channel) }
            case .keep(let cents): kept = cents
            }
            guard let cents = kept,
                try insert(
                    db, server, amount: cents.amount, balanceAfter: cents.balanceAfter, via: "outbox", now: now),
                let child = try lockedChild(db, server.childId)
            else {
                // Already stored. By the hub's echo while the write was being sent: the echo took the stand-in's
                // place and the balance is the server's. By a catch-up after a restart (the server took the write,
                // the relay died before the answer): the stand-in was still here and that balance counted it on top
                // of the server's, so it comes out with the stand-in. Or the answer cannot be kept (set aside, as
                // from the hub): the stand-in goes, and the next catch-up brings the server's balance.
                if standInRemoved, let child = try lockedChild(db, entry.childId) {
                    let minor = entry.amountCents
                    try setBalance(db, entry.childId, child.balance - (entry.type == .credit ? minor : -minor), now)
                }
                return
            }
            // The server's balance after this write, plus the writes still waiting here.
            try setBalance(db, server.childId, cents.balanceAfter + child.pending, now)
            if try plan(
                db,
                RelayEvent(
                    kind: .transactionCreated, at: now, childId: server.childId, childName: child.name,
                    transaction: server, balance: server.balanceAfter,
                    previousBalance: Money.decimal(cents: cents.balanceBefore)), now: now) > 0
            {
                try db.notify(Self.channel)
            }
        }
    }

    public func outboxRetry(_ seq: Int64, error: String, retryAt: Date) throws(StoreError) {
        try settle(seq) { (db, _) throws(PostgresError) in
            try db.query(
                "UPDATE relay_outbox SET state = 'pending', last_error = $2, due_at = $3::timestamptz WHERE seq = $1",
                [String(seq), error, ISODate.string(retryAt)])
        }
    }

    /// Refused for good by the server: undone here, with an `outbox.rejected` alert.
    public func outboxRejected(_ seq: Int64, reason: String, at now: Date) throws(StoreError) {
        try giveUp(seq, as: .rejected, reason: reason, at: now)
    }

    /// Given up (a dead letter): undone like a rejection, kept for `outbox list`, with an `outbox.dead` alert.
    public func outboxDead(_ seq: Int64, reason: String, at now: Date) throws(StoreError) {
        try giveUp(seq, as: .dead, reason: reason, attempted: false, at: now)
    }

    private func giveUp(
        _ seq: Int64, as state: OutboxEntry.State, reason: String, attempted: Bool = true, at now: Date
    ) throws(StoreError) {
        try settle(seq, attempted: attempted) { (db, entry) throws(PostgresError) in
            try db.query(
                "UPDATE relay_outbox SET state = $2, last_error = $3 WHERE seq = $1",
                [String(seq), state.rawValue, reason])
            try undo(db, entry, now: now)
            let child = try childRow(db, entry.childId)
            let local = Transaction(
                id: entry.localTransactionId, childId: entry.childId, amount: entry.amount, type: entry.type,
                description: entry.description, balanceAfter: Money.decimal(cents: child?.balance ?? 0),
                createdAt: entry.createdAt, createdByName: "allowance-relay")
            let alert = RelayEvent(
                kind: state == .dead ? .outboxDead : .outboxRejected, at: now, childId: entry.childId,
                childName: child?.name, transaction: local, detail: reason)
            if try plan(db, alert, now: now) > 0 { try db.notify(Self.channel) }
        }
    }

    /// An outcome, where the claim is still this replica's (else another replica took the write after this one's
    /// claim expired, and its outcome is the one kept); the child's next write becomes claimable.
    private func settle(
        _ seq: Int64, attempted: Bool = true,
        _ body: (PostgresConnection, OutboxEntry) throws(PostgresError) -> Void
    ) throws(StoreError) {
        try working { db throws(PostgresError) in
            try db.transaction { () throws(PostgresError) in
                guard
                    let entry = try db.query(
                        """
                        UPDATE relay_outbox SET attempts = attempts + \(attempted ? 1 : 0), claimed_by = NULL, claim_expires_at = NULL
                        WHERE seq = $1 AND claimed_by = $2 AND state = 'in_flight' RETURNING \(Self.outboxColumns())
                        """, [String(seq), replica]
                    ).rows.first.flatMap(Self.outboxEntry)
                else { return }
                // The child's row first, as the link holder's writer takes it: the two never wait on each other in a
                // circle (the writer storing the hub's echo of this write while this stores the answer).
                _ = try lockedChild(db, entry.childId)
                try body(db, entry)
                try db.notify(Self.outboxChannel)
            }
        }
    }

    /// The write's local transaction is gone (the server's replaces it).
    /// Removes the write's stand-in (its local transaction); how many rows went (0: the hub's echo took it already).
    @discardableResult
    func dropLocal(_ db: PostgresConnection, _ entry: OutboxEntry) throws(PostgresError) -> Int {
        try db.query(
            "DELETE FROM relay_txn WHERE id = $1 AND origin = 'local-pending'", [entry.localTransactionId.lowercased]
        ).affected
    }

    /// The write is undone here: its local transaction, and its effect on the balance while it was still there (the
    /// hub may have brought the server's copy already, whose balance is the server's).
    func undo(_ db: PostgresConnection, _ entry: OutboxEntry, now: Date) throws(PostgresError) {
        guard let child = try lockedChild(db, entry.childId) else { return }
        let removed = try db.query(
            "DELETE FROM relay_txn WHERE id = $1 AND origin = 'local-pending'", [entry.localTransactionId.lowercased]
        ).affected
        guard removed > 0 else { return }
        let minor = entry.amountCents
        try setBalance(db, entry.childId, child.balance - (entry.type == .credit ? minor : -minor), now)
    }

    /// A write given up is queued again: its local transaction and effect come back.
    func redo(_ db: PostgresConnection, _ entry: OutboxEntry, now: Date) throws(PostgresError) {
        guard let child = try lockedChild(db, entry.childId) else { return }
        let minor = entry.amountCents
        let after = child.balance + (entry.type == .credit ? minor : -minor)
        let local = Transaction(
            id: entry.localTransactionId, childId: entry.childId, amount: entry.amount, type: entry.type,
            description: entry.description, balanceAfter: Money.decimal(cents: after), createdAt: now,
            createdByName: "allowance-relay")
        if try insert(
            db, local, amount: minor, balanceAfter: after, via: "local", origin: "local-pending", now: now)
        {
            try setBalance(db, entry.childId, after, now)
        }
    }

    static func outboxColumns(_ table: String = "") -> String {
        let t = table.isEmpty ? "" : table + "."
        return """
            \(t)seq, \(t)idempotency_key, \(t)child_id, \(t)amount_minor, \(t)type, \(t)description, \(t)state, \(t)attempts, \(t)last_error,
            extract(epoch FROM \(t)created_at), \(t)local_txn_id
            """
    }

    static func outboxEntry(_ row: [String?]) -> OutboxEntry? {
        guard let seq = row[0].flatMap({ Int64($0) }), let child = row[2].flatMap(UUID.init(uuidString:)),
            let minor = row[3].flatMap({ Int64($0) }),
            let type = row[4].flatMap(TransactionType.init(rawValue:)),
            let state = row[6].flatMap(OutboxEntry.State.init(rawValue:))
        else { return nil }
        return OutboxEntry(
            seq: seq, idempotencyKey: row[1] ?? "",
            localTransactionId: row[10].flatMap(UUID.init(uuidString:)) ?? UUID(),
            childId: child,
            amountCents: minor, type: type,
            description: row[5] ?? "", state: state, attempts: Int(row[7] ?? "") ?? 0, lastError: row[8],
            createdAt: row[9].flatMap(Double.init).map(Date.init(timeIntervalSince1970:)) ?? .distantPast)
    }
}
