import AllowanceAPI
import Core
import Foundation
import PostgresTransport
import StoreContract

/// What the CLI reads and changes on the shared database; each change notifies the replicas, whose workers or
/// outbox drain look again at once.
extension SharedRelayStore: OperatorStore {
    public func delivery(id: String) throws(StoreError) -> Delivery? {
        try writing { db throws(PostgresError) -> Delivery? in
            try db.query("SELECT \(Self.deliveryColumns()) FROM relay_delivery WHERE id = $1", [id]).rows.first
                .flatMap(Self.delivery)
        }
    }

    @discardableResult
    public func retryDeliveries(id: String? = nil, sink: String? = nil, at now: Date = Date()) throws(StoreError) -> Int
    {
        try writing { db throws(PostgresError) -> Int in
            try db.transaction { () throws(PostgresError) -> Int in
                let n =
                    try db.query(
                        """
                        WITH retried AS (
                          UPDATE relay_delivery SET state = 'pending', attempts = 0, due_at = $3::timestamptz
                          WHERE state = 'dead' AND ($1::text IS NULL OR id = $1) AND ($2::text IS NULL OR sink = $2)
                          RETURNING sink),
                        resumed AS (
                          UPDATE relay_sink_state SET paused_until = NULL WHERE sink IN (SELECT sink FROM retried))
                        SELECT count(*) FROM retried
                        """, [id, sink, ISODate.string(now)]
                    ).scalar.flatMap { Int($0) } ?? 0
                // A person asked: the sinks' back-off ends on every replica.
                if n > 0 {
                    try db.notify(Self.channel)
                    try db.notify(Self.retryChannel)
                }
                return n
            }
        }
    }

    public func enableSink(_ sink: String, at now: Date = Date()) throws(StoreError) {
        try writing { db throws(PostgresError) in
            try db.transaction { () throws(PostgresError) in
                try db.query(
                    "UPDATE relay_sink_state SET disabled_reason = NULL, disabled_at = NULL, paused_until = NULL WHERE sink = $1",
                    [sink])
                try db.query(
                    "UPDATE relay_delivery SET due_at = $2::timestamptz WHERE sink = $1 AND state = 'pending' AND due_at > $2::timestamptz",
                    [sink, ISODate.string(now)])
                try db.notify(Self.channel)
                try db.notify(Self.retryChannel)
            }
        }
    }

    @discardableResult
    public func purgeDeliveries(before: Date, includingDead: Bool) throws(StoreError) -> Int {
        let states: [Delivery.State] = includingDead ? [.delivered, .merged, .dead] : [.delivered, .merged]
        return try writing { db throws(PostgresError) -> Int in
            try db.query(
                "DELETE FROM relay_delivery WHERE state = ANY($1::text[]) AND created_at < $2::timestamptz",
                [Self.array(states.map(\.rawValue)), ISODate.string(before)]
            ).affected
        }
    }

    /// A write not sent, or given up, is due now with a fresh count of attempts (a given-up one with its local
    /// transaction and effect restored).
    public func retryOutbox(_ seq: Int64, at now: Date = Date()) throws(StoreError) {
        try changeOutbox(seq, "retried") { (db, entry) throws(PostgresError) in
            if entry.state != .pending { try redo(db, entry, now: now) }
            try db.query(
                """
                UPDATE relay_outbox SET state = 'pending', attempts = 0, last_error = NULL, due_at = $2::timestamptz,
                  created_at = $2::timestamptz WHERE seq = $1
                """, [String(seq), ISODate.string(now)])
            try db.notify(Self.outboxChannel)
        }
    }

    /// Gives up a write that was not sent: its local transaction and effect are undone.
    public func dropOutbox(_ seq: Int64, at now: Date = Date()) throws(StoreError) {
        try changeOutbox(seq, "dropped") { (db, entry) throws(PostgresError) in
            if entry.state == .pending { try undo(db, entry, now: now) }
            try db.query("DELETE FROM relay_outbox WHERE seq = $1", [String(seq)])
        }
    }

    /// A change the CLI makes to a write that no replica is sending (pending, rejected or dead), its row locked.
    private func changeOutbox(
        _ seq: Int64, _ verb: String, _ body: (PostgresConnection, OutboxEntry) throws(PostgresError) -> Void
    ) throws(StoreError) {
        let refusal = try writing { db throws(PostgresError) -> String? in
            try db.transaction { () throws(PostgresError) -> String? in
                guard
                    let entry = try db.query(
                        "SELECT \(Self.outboxColumns()) FROM relay_outbox WHERE seq = $1 FOR UPDATE", [String(seq)]
                    ).rows.first.flatMap(Self.outboxEntry)
                else { return "No outbox entry #\(seq)." }
                guard [.pending, .rejected, .dead].contains(entry.state) else {
                    return
                        "Outbox entry #\(seq) is \(entry.state.rawValue); only pending, rejected or dead ones can be \(verb)."
                }
                try body(db, entry)
                return nil
            }
        }
        if let refusal { throw StoreError(path: location.description, refusal) }
    }

    public func summary() throws(StoreError) -> StoreSummary {
        let contact = try contact()
        let bytes = try storageBytes()
        return try writing { db throws(PostgresError) -> StoreSummary in
            let row = try db.query(
                """
                SELECT (SELECT count(*) FROM relay_child WHERE removed_at IS NULL), (SELECT count(*) FROM relay_txn),
                       (SELECT count(*) FROM relay_outbox WHERE state IN ('pending', 'in_flight')),
                       (SELECT count(*) FROM relay_outbox WHERE state IN ('rejected', 'dead'))
                """
            ).rows.first
            let migrations = try db.query("SELECT name FROM relay_schema_migrations ORDER BY version").rows.compactMap {
                $0[0]
            }
            func count(_ i: Int) -> Int { Int(row?[i] ?? "") ?? 0 }
            return StoreSummary(
                path: location.description, fileBytes: bytes, migrations: migrations, children: count(0),
                transactions: count(1), inboxRows: nil, outboxWaiting: count(2), outboxRejected: count(3),
                lastCatchUp: contact.lastCatchUp, lastEvent: contact.lastEvent, lastContact: contact.lastContact)
        }
    }

    /// The link holder's, as it last recorded it; nil while no live replica holds the link.
    public func linkStatus() throws(StoreError) -> LinkStatus? {
        guard let holder = try replicas().first(where: \.holdsLink) else { return nil }
        return try syncValue("link:\(holder.name)").flatMap { try? JSONValue(parsing: $0.utf8) }
            .flatMap(LinkStatus.init(json:))
    }

    public func historyTaken() throws(StoreError) -> (transactions: Int, at: Date)? {
        guard let text = try syncValue("history") else { return nil }
        let parts = text.split(separator: " ")
        guard parts.count == 2, let n = Int(parts[0]), let at = ISODate.parse(String(parts[1])) else { return nil }
        return (n, at)
    }
}
