import AllowanceAPI
import Core
import Foundation
import PostgresTransport
import StoreContract

/// What a catch-up checks on the shared database, as on the file (`Store`'s Reconcile.swift): whether the server
/// still has what the cache holds, whether balances add up, which children it deleted, which rows were set aside.
/// Only the server's rows count, not the writes made here and still waiting.
extension SharedRelayStore {
    public func lostOnServer(_ windows: [ReadWindow]) throws(StoreError) -> String? {
        try writing { db throws(PostgresError) -> String? in
            var described: [String] = []
            for window in windows { described += try lost(db, window) }
            return ConflictText.lost(described)
        }
    }

    /// The transactions `window` shows the server lost, described, newest first: each stored before the catch-up
    /// began and newer than the cursor (all of them, when paging never met it) that the pages did not have.
    private func lost(_ db: PostgresConnection, _ window: ReadWindow) throws(PostgresError) -> [String] {
        var described: [String] = []
        var newerThan: String?  // nil: the whole history
        if let cursor = window.cursor {
            let cursorAt = try db.query("SELECT created_at::text FROM relay_txn WHERE id = $1", [cursor.lowercased])
                .scalar
            if window.cursorFound {
                // A transaction at the cursor's very instant may sort below it: only strictly newer ones are read.
                newerThan = cursorAt ?? "infinity"
            } else if cursorAt == nil {
                described.append("transaction \(cursor.lowercased) (the newest the last catch-up saw for this child)")
            }
        }
        let candidates = try db.query(
            """
            \(Self.describedTransaction) WHERE t.child_id = $1 AND t.origin = 'server'
            AND ($2::timestamptz IS NULL OR t.created_at > $2::timestamptz)
            AND t.stored_at < $3::timestamptz ORDER BY t.created_at DESC
            """, [window.child.lowercased, newerThan, ISODate.string(window.startedAt)]
        ).rows
        let onServer = { (id: String) in
            window.seen.contains(id) || window.cursorFound && id == window.cursor?.lowercased
        }
        return described + candidates.filter { !onServer($0[0] ?? "") }.map(Self.describe)
    }

    public func balanceMismatches(_ children: [Child], askedAt: Date) throws(StoreError) -> [BalanceMismatch] {
        try writing { db throws(PostgresError) -> [BalanceMismatch] in
            var found: [BalanceMismatch] = []
            for c in children {
                let updated = try db.query(
                    "SELECT extract(epoch FROM updated_at) FROM relay_child WHERE id = $1", [c.id.lowercased]
                ).scalar.flatMap(Double.init)
                if let updated, updated > askedAt.timeIntervalSince1970 { continue }
                // Every transaction at the newest instant: two in one millisecond have no order between them.
                let newest = try db.query(
                    """
                    \(Self.describedTransaction) WHERE t.child_id = $1 AND t.origin = 'server'
                    AND t.created_at = (SELECT max(created_at) FROM relay_txn WHERE child_id = $1 AND origin = 'server')
                    """, [c.id.lowercased]
                ).rows
                // A balance with a third decimal is no evidence either way: the catch-up refuses that child
                // (`StoreError.kept`).
                guard let first = newest.first, let server = Money.minorUnits(c.currentBalance) else { continue }
                guard !newest.contains(where: { $0[4].flatMap { Int64($0) } == server }) else { continue }
                let after = first[4].flatMap { Int64($0) } ?? 0
                found.append(
                    BalanceMismatch(
                        child: c.id, serverBalance: c.currentBalance, newest: first[0] ?? "",
                        evidence: ConflictText.balance(
                            child: c.firstName, server: c.currentBalance, newest: Self.describe(first), leftMinor: after
                        )))
            }
            return found
        }
    }

    @discardableResult
    public func markRemoved(keeping listed: [Child], at now: Date = Date()) throws(StoreError) -> [Child] {
        let gone = try children().filter { c in !listed.contains { $0.id == c.id } }
        guard !gone.isEmpty else { return [] }
        try writing { db throws(PostgresError) in
            try db.query(
                "UPDATE relay_child SET removed_at = $2::timestamptz WHERE id = ANY($1::text[])",
                [Self.array(gone.map(\.id.lowercased)), ISODate.string(now)])
        }
        return gone
    }

    public func rejectedRows() throws(StoreError) -> [(id: String, childId: UUID?, reason: String, at: Date)] {
        try writing { db throws(PostgresError) -> [(id: String, childId: UUID?, reason: String, at: Date)] in
            try db.query(
                "SELECT id, child_id, reason, extract(epoch FROM first_seen_at) FROM relay_rejected ORDER BY first_seen_at DESC, id DESC"
            ).rows.map {
                (
                    $0[0] ?? "", $0[1].flatMap(UUID.init(uuidString:)), $0[2] ?? "",
                    $0[3].flatMap(Double.init).map(Date.init(timeIntervalSince1970:)) ?? .distantPast
                )
            }
        }
    }
}
