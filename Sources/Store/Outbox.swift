import Alerts
import AllowanceAPI
import Foundation
import GRDB
import StoreContract

extension Store {
    /// Records a write made here: the optimistic local transaction, the new local balance and the outbox row,
    /// in one SQLite transaction. Works with the backend down. At most `limit` writes wait (`outbox.limit`, 100 by default).
    public func enqueueTransaction(
        child: UUID, amount: Decimal, type: TransactionType, description: String, limit: Int = 100,
        at now: Date = Date()
    ) throws(StoreError) -> OutboxEntry {
        try write { db -> OutboxEntry in
            try Self.settleBalances(db)  // the balance is written below as a figure of its own
            let waiting = try JobQueue<OutboxEntry>.waitingCount(db)
            let balance = try Int64.fetchOne(
                db, sql: "SELECT balance_minor FROM child WHERE id = ?", arguments: [child.lowercased])
            let minor: Int64
            switch OutboxCheck.check(
                child: child, amount: amount, type: type, balance: balance, waiting: waiting, limit: limit)
            {
            case .success(let value): minor = value
            case .failure(let refusal): throw StoreError(path: path, refusal.message)
            }
            let before = balance ?? 0
            let after = before + (type == .credit ? minor : -minor)
            let localId = UUID()
            let key = UUID.random().lowercased
            let stamp = ISO.string(now)
            let local = Transaction(
                id: localId, childId: child, amount: amount, type: type, description: description,
                balanceAfter: Money.decimal(cents: after), createdAt: now, createdByName: "allowance-relay")
            try Self.insert(
                db, local, TransactionRowValues(local, cents: (minor, after, before), storedAt: stamp),
                origin: "local-pending", via: "local")
            try db.execute(
                sql: "UPDATE child SET balance_minor = ?, updated_at = ? WHERE id = ?",
                arguments: [after, stamp, child.lowercased])
            try db.execute(
                sql: """
                    INSERT INTO outbox (idempotency_key, local_txn_id, child_id, amount_minor, type, description, state,
                                        next_attempt_at, created_at)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
                    """,
                arguments: [
                    key, localId.lowercased, child.lowercased, minor, type.rawValue, description,
                    OutboxEntry.State.pending, stamp, stamp,
                ])
            guard let entry = try Self.entry(db, seq: db.lastInsertedRowID) else {
                throw StoreError(path: path, "The outbox row was not written.")
            }
            return entry
        }
    }

    /// Writes due to be sent now, in the order they were made. A write waiting for a retry (or in flight) holds
    /// back the later writes for the same child: the server must see them in order.
    public func dueOutbox(at now: Date = Date()) throws(StoreError) -> [OutboxEntry] {
        try read { db in
            var held = Set<String>()
            let stamp = ISO.string(now)
            let due = try JobQueue<OutboxEntry>.waiting(db, order: "seq") { row -> Int64? in
                let child: String = row["child_id"]
                guard !held.contains(child) else { return nil }
                guard row["state"] != OutboxEntry.State.inFlight, (row["next_attempt_at"] as String) <= stamp else {
                    held.insert(child)
                    return nil
                }
                return row["seq"]
            }
            return try due.compactMap { try Self.entry(db, seq: $0) }
        }
    }

    /// The backend is back: writes waiting for a retry are due now rather than at the end of their back-off.
    @discardableResult
    public func outboxDueNow(at now: Date = Date()) throws(StoreError) -> Int {
        try write { db in try JobQueue<OutboxEntry>.dueNow(db, at: now) }
    }

    /// When the next retry of a waiting write is due (nil: none is waiting for a later time). Never a time already
    /// past: a write held back behind another is due with it.
    public func nextOutboxAttempt(after now: Date = Date()) throws(StoreError) -> Date? {
        try read { db in
            try String.fetchOne(
                db, sql: "SELECT MIN(next_attempt_at) FROM outbox WHERE state = ? AND next_attempt_at > ?",
                arguments: [OutboxEntry.State.pending, ISO.string(now)]
            ).flatMap(ISODate.parse)
        }
    }

    public func outbox() throws(StoreError) -> [OutboxEntry] {
        try read { db in
            try Int64.fetchAll(db, sql: "SELECT seq FROM outbox ORDER BY seq").compactMap {
                try Self.entry(db, seq: $0)
            }
        }
    }

    /// A write is being sent: a hub echo of it may come before the answer (`dropLocalEcho` matches in-flight writes
    /// only, so that someone else's identical write on the server is never taken for ours).
    public func markInFlight(_ seq: Int64) throws(StoreError) {
        try write { db in try JobQueue<OutboxEntry>.markInFlight(db, seq) }
    }

    /// After a crash nothing is really in flight: send those again (the idempotency key makes it safe).
    @discardableResult
    public func requeueInFlight() throws(StoreError) -> Int {
        try write { db in try JobQueue<OutboxEntry>.requeueInFlight(db) }
    }

    /// The server accepted the write: its transaction replaces the local one, in one SQLite transaction. When the
    /// hub (or a catch-up) brought the server's copy first, that already did it: only the outbox row is closed.
    public func outboxSent(_ seq: Int64, server: Transaction, at now: Date = Date()) throws(StoreError) {
        try write { db in
            guard let e = try Self.entry(db, seq: seq) else { return }
            try Self.settleBalances(db)  // the stand-in goes, and the server's transaction comes, under the balance
            try db.execute(
                sql: "DELETE FROM txn WHERE id = ? AND origin = 'local-pending'",
                arguments: [e.localTransactionId.lowercased])
            let standInRemoved = db.changesCount > 0
            try JobQueue<OutboxEntry>.record(db, seq, .done(at: now))
            var kept: TransactionCents?
            switch HubEventPolicy.keeping(server, now: now) {
            case .setAside(let row): try setAside(db, row, now: now)
            case .keep(let cents): kept = cents
            }
            guard let cents = kept, try !Self.isStored(db, id: server.id) else {
                // Already stored. By the hub's echo while the write was being sent: the echo took the stand-in's
                // place and the balance is the server's. By a catch-up after a restart (the server took the write,
                // the relay died before the answer): the stand-in was still here and that balance counted it on top
                // of the server's, so it comes out with the stand-in. Or the answer cannot be kept (set aside, as
                // from the hub): the stand-in goes, and the next catch-up brings the server's balance.
                if standInRemoved {
                    try db.execute(
                        sql: "UPDATE child SET balance_minor = balance_minor + ?, updated_at = ? WHERE id = ?",
                        arguments: [
                            e.type == .credit ? -e.amountCents : e.amountCents, ISO.string(now), e.childId.lowercased,
                        ])
                }
                return
            }
            try Self.insert(
                db, server, TransactionRowValues(server, cents: cents, storedAt: ISO.string(now)), via: "outbox")
            // The server's balance after this write, plus the writes still waiting here.
            let pending = try Self.pendingEffect(db, server.childId)
            try Self.setBalance(db, server.childId, minor: cents.balanceAfter + pending, updatedAt: ISO.string(now))
            // This inbox row claims the hub's TransactionCreated for this write, so its alert is planned here, with the
            // balance before it as the server had it (the cache's already counted the write).
            try planDeliveries(
                db,
                RelayEvent(
                    kind: .transactionCreated, at: now, childId: server.childId,
                    childName: try Self.childName(db, server.childId),
                    transaction: server, balance: server.balanceAfter,
                    previousBalance: Money.decimal(cents: cents.balanceBefore)))
        }
    }

    /// A failure a retry may fix: back to pending, due again at `retryAt`.
    public func outboxRetry(_ seq: Int64, error: String, retryAt: Date) throws(StoreError) {
        try write { db in try JobQueue<OutboxEntry>.record(db, seq, .retry(error: error, at: retryAt)) }
    }

    /// The server refused the write for good (400/409/422...): the local transaction and its effect on the balance
    /// are undone. The server's version of the data wins.
    public func outboxRejected(_ seq: Int64, reason: String, at now: Date = Date()) throws(StoreError) {
        try giveUp(seq, state: .rejected, reason: reason, attempted: true, at: now)
    }

    /// Retried too often or for too long (dead letter): undone like a rejection, kept for `outbox list`.
    public func outboxDead(_ seq: Int64, reason: String, at now: Date = Date()) throws(StoreError) {
        try giveUp(seq, state: .dead, reason: reason, attempted: false, at: now)
    }

    private func giveUp(
        _ seq: Int64, state: OutboxEntry.State, reason: String, attempted: Bool, at now: Date
    ) throws(StoreError) {
        try write { db in
            guard let e = try Self.entry(db, seq: seq) else { return }
            try Self.settleBalances(db)  // the stand-in goes from under the balance
            let minor = e.amountCents
            try db.execute(
                sql: "DELETE FROM txn WHERE id = ? AND origin = 'local-pending'",
                arguments: [e.localTransactionId.lowercased])
            // No local row left: the hub already brought the server's copy of it, and the balance is the server's.
            if db.changesCount > 0 {
                try db.execute(
                    sql: "UPDATE child SET balance_minor = balance_minor + ?, updated_at = ? WHERE id = ?",
                    arguments: [e.type == .credit ? -minor : minor, ISO.string(now), e.childId.lowercased])
            }
            try JobQueue<OutboxEntry>.record(
                db, seq, .gaveUp(reason: reason), attempted: attempted, gaveUpAs: state)
            let local = Transaction(
                id: e.localTransactionId, childId: e.childId, amount: e.amount, type: e.type,
                description: e.description,
                balanceAfter: Money.decimal(cents: try Self.childBalance(db, e.childId) ?? 0), createdAt: e.createdAt,
                createdByName: "allowance-relay")
            try planDeliveries(
                db,
                RelayEvent(
                    kind: state == .dead ? .outboxDead : .outboxRejected, at: now, childId: e.childId,
                    childName: try Self.childName(db, e.childId), transaction: local, detail: reason))
        }
    }

    private static func entry(_ db: Database, seq: Int64) throws -> OutboxEntry? {
        try OutboxEntry.fetchOne(try db.cachedStatement(sql: "SELECT * FROM outbox WHERE seq = ?"), arguments: [seq])
    }
}

extension OutboxEntry.State: DatabaseValueConvertible {}

/// An outbox row as a typed record (GRDB's `FetchableRecord`); the queue's machine is `JobQueue<OutboxEntry>`.
extension OutboxEntry: FetchableRecord, TableRecord, QueuedJob {
    public static let databaseTableName = "outbox"
    static let keyCondition = "seq = ?"
    static func keyValues(_ seq: Int64) -> [SQLValue] { [.integer(seq)] }
    static let doneAtColumn: String? = nil
    static let recordSQL = OutcomeSQL(Self.self)

    /// A row as a record; a value this version cannot read (a damaged file) throws with the column and the value.
    public init(row: Row) throws {
        func unreadable(_ column: String) -> APIError {
            APIError(
                .invalidPayload,
                "outbox row \(row["seq"] as Int64? ?? 0): unreadable \(column) '\(row[column] as String? ?? "")'")
        }
        guard let local = (row["local_txn_id"] as String?).flatMap(UUID.init(uuidString:)) else {
            throw unreadable("local_txn_id")
        }
        guard let child = (row["child_id"] as String?).flatMap(UUID.init(uuidString:)) else {
            throw unreadable("child_id")
        }
        guard let type = (row["type"] as String?).flatMap(TransactionType.init(rawValue:)) else {
            throw unreadable("type")
        }
        guard let state = (row["state"] as String?).flatMap(State.init(rawValue:)) else { throw unreadable("state") }
        self.init(
            seq: row["seq"], idempotencyKey: row["idempotency_key"], localTransactionId: local, childId: child,
            amountCents: row["amount_minor"], type: type, description: row["description"], state: state,
            attempts: row["attempts"], lastError: row["last_error"],
            createdAt: ISODate.parse(row["created_at"]) ?? .distantPast)
    }
}

extension Store {
    /// Makes a waiting, rejected or dead write due now (a given-up one is queued again with its local effect
    /// restored, and a fresh count of attempts).
    public func retryOutbox(_ seq: Int64, at now: Date = Date()) throws(StoreError) {
        try write { db in
            guard let e = try Self.entry(db, seq: seq) else { throw StoreError(path: path, "No outbox entry #\(seq).") }
            guard [.pending, .rejected, .dead].contains(e.state) else {
                throw StoreError(
                    path: path,
                    "Outbox entry #\(seq) is \(e.state.rawValue); only pending, rejected or dead ones can be retried.")
            }
            if e.state != .pending {
                try Self.settleBalances(db)  // a stand-in comes back under the balance
                try Self.restoreStandIn(db, of: e, at: now)
            }
            _ = try JobQueue<OutboxEntry>.requeue(
                db, states: OutboxEntry.State.allCases, filter: "seq = ?", [seq], at: now)
            try db.execute(sql: "UPDATE outbox SET created_at = ? WHERE seq = ?", arguments: [ISO.string(now), seq])
        }
    }

    /// A given-up write's stand-in (its local transaction), written again with its effect on the balance. As the
    /// PostgreSQL store's redo: the balance moves only with a stand-in written now, never for a row already under its
    /// id, and there is none for a child whose row is gone (a balance counted from 0 would be wrong); the write waits
    /// all the same, and its answer brings the server's row.
    private static func restoreStandIn(_ db: Database, of e: OutboxEntry, at now: Date) throws {
        guard
            let before = try Int64.fetchOne(
                db, sql: "SELECT balance_minor FROM child WHERE id = ?", arguments: [e.childId.lowercased])
        else { return }
        let minor = e.amountCents
        let after = before + (e.type == .credit ? minor : -minor)
        let stamp = ISO.string(now)
        let local = Transaction(
            id: e.localTransactionId, childId: e.childId, amount: e.amount, type: e.type, description: e.description,
            balanceAfter: Money.decimal(cents: after), createdAt: now, createdByName: "allowance-relay")
        guard
            try insert(
                db, local, TransactionRowValues(local, cents: (minor, after, before), storedAt: stamp),
                origin: "local-pending", via: "local", ifNew: true)
        else { return }
        try db.execute(
            sql: "UPDATE child SET balance_minor = ?, updated_at = ? WHERE id = ?",
            arguments: [after, stamp, e.childId.lowercased])
    }

    /// Gives up a write that was not sent: the local transaction and its effect on the balance are undone.
    public func dropOutbox(_ seq: Int64, at now: Date = Date()) throws(StoreError) {
        guard let e = try outbox().first(where: { $0.seq == seq }) else {
            throw StoreError(path: path, "No outbox entry #\(seq).")
        }
        guard [.pending, .rejected, .dead].contains(e.state) else {
            throw StoreError(
                path: path,
                "Outbox entry #\(seq) is \(e.state.rawValue); only pending, rejected or dead ones can be dropped.")
        }
        if e.state == .pending {
            try giveUp(seq, state: .rejected, reason: "dropped by the user", attempted: false, at: now)
        }
        try write { db in try db.execute(sql: "DELETE FROM outbox WHERE seq = ?", arguments: [seq]) }
    }
}
