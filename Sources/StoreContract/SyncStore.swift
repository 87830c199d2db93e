import Alerts
import AllowanceAPI
import Core
import Foundation

/// What the sync engine needs of a store: hub events applied with their alerts planned in one transaction, what a
/// catch-up stores and checks (the server's identity, lost data, balances, deleted children, quarantined rows), the
/// cursors, the outbox and the sync state. Both stores implement it, so one engine (`SyncCoordinator`, `CatchUp`)
/// keeps either whole.
public protocol SyncStore: OutboxQueue, DeliveryLedger, StatusSource, GoalStore, ChildRoster {
    /// Applies hub events in order, in one transaction: one commit for a burst, with the deliveries they plan. If
    /// any fails, none is stored. One that contradicts the cache fails the burst with a conflict.
    func apply(_ events: [HubEvent], at now: Date, traceParents: [String?]) throws(StoreError) -> [ApplyResult]
    func setSyncStatus(_ status: SyncStatus) throws(StoreError)
    /// Binds the cache to the server it is filled from; later, refuses another one (a conflict). Returns a note to
    /// log when the same family moved to another URL.
    func bindServer(_ server: ServerIdentity) throws(StoreError) -> String?
    /// Whether a catch-up ever completed (false: the next one reads the family's history).
    func hasCaughtUp() throws(StoreError) -> Bool
    /// The newest transaction of the child's last completed catch-up.
    func catchUpCursor(child: UUID) throws(StoreError) -> UUID?
    /// Stores a page of a catch-up, or (`complete`) finishes one: the server's balances, the cursors, the time.
    /// Returns how many transactions were new.
    @discardableResult
    func storeCaughtUp(
        children: [Child], transactions: [Transaction], rejected: [RejectedRow], cursors: [UUID: UUID], complete: Bool,
        balancesAskedAt: Date?, history: Bool, historyTaken: Int?, at now: Date, traceParent: String?
    ) throws(StoreError) -> Int
    /// Whether the cache held any of the child's transactions from the server before `date`.
    func hasTransactions(child: UUID, storedBefore date: Date) throws(StoreError) -> Bool
    /// Why the server's answers for `windows` show it lost transactions the cache holds (nil: they do not).
    func lostOnServer(_ windows: [ReadWindow]) throws(StoreError) -> String?
    /// The children whose balance on the server is not what their newest cached transaction left.
    func balanceMismatches(_ children: [Child], askedAt: Date) throws(StoreError) -> [BalanceMismatch]
    /// Marks the cached children the server no longer lists as removed; returns them.
    @discardableResult func markRemoved(keeping listed: [Child], at now: Date) throws(StoreError) -> [Child]
    /// Rows from the server set aside, newest first.
    func rejectedRows() throws(StoreError) -> [(id: String, childId: UUID?, reason: String, at: Date)]
    /// A conflict found outside a write, as the error the sync engine acts on.
    func conflict(_ message: String) -> StoreError
}

/// What to do with the server a catch-up meets, against the one the cache was filled from: the decision both stores
/// take the same way.
public enum ServerBinding: Equatable, Sendable {
    /// Record `server` (the first catch-up, or the same family with more to say about it); `note` is logged.
    case record(note: String?)
    /// Nothing changes.
    case keep
    /// Another server's or family's data: nothing is stored.
    case conflict(String)

    public static func decide(known: ServerIdentity?, server: ServerIdentity) -> ServerBinding {
        guard let known else { return .record(note: nil) }
        if let ids = known.accountIds, let now = server.accountIds {
            guard ids == now else {
                return .conflict(
                    "The cache was filled for another account or family (\(ids)); the server at \(server.url) now says \(now). "
                        + StoreError.conflictFix)
            }
            guard known.url != server.url else { return .keep }
            return .record(
                note: "the server moved from \(known.url) to \(server.url) (same family): the cache carries on")
        }
        guard known.url == server.url else {
            return .conflict(
                "The cache was filled from \(known.url); the configuration now points at \(server.url). "
                    + StoreError.conflictFix)
        }
        return server.accountIds != nil ? .record(note: nil) : .keep
    }
}

/// What one catch-up read of a child's history, for the check that the server still has what the cache holds.
///
/// The Allowance Tracker API has no way to edit or delete a transaction (its only delete is a whole child,
/// `DELETE /api/v1/children/{id}`): a transaction the server once sent and no longer has was lost on the server's
/// side (a backend restored from an older backup), never changed by a parent. A child missing from the server's list
/// was deleted on purpose and is told apart (`markRemoved`).
public struct ReadWindow: Sendable {
    public var child: UUID
    /// The newest transaction of the child's last completed catch-up, which paging went down to (nil: none yet).
    public var cursor: UUID?
    /// Whether paging met the cursor; when it did not, the whole history was read and the cursor is not in it.
    public var cursorFound = false
    /// The ids the server sent, lower-cased.
    public var seen: Set<String> = []
    /// When the catch-up began reading (this machine's clock, as `stored_at`).
    public var startedAt: Date

    public init(child: UUID, cursor: UUID?, startedAt: Date) {
        self.child = child
        self.cursor = cursor
        self.startedAt = startedAt
    }
}

/// A child's balance on the server that is not what the newest cached transaction left: the evidence, and what
/// identifies it (the same mismatch on two reads in a row is not a transaction made between them).
public struct BalanceMismatch: Sendable, Equatable {
    public var child: UUID
    public var serverBalance: Decimal
    public var newest: String
    public var evidence: String

    public init(child: UUID, serverBalance: Decimal, newest: String, evidence: String) {
        self.child = child
        self.serverBalance = serverBalance
        self.newest = newest
        self.evidence = evidence
    }

    /// The evidence of balances that do not add up, as a conflict message.
    public static func conflict(_ mismatches: [BalanceMismatch]) -> String {
        "The server's balances do not add up with the transactions the cache holds: "
            + mismatches.map(\.evidence).joined(separator: "; ")
            + ". Transactions the cache holds are missing on the server, or the server changed a balance without a "
            + "transaction. " + StoreError.conflictFix
    }
}

/// The words of the catch-up's and the writer's conflicts, one text for both stores: what is wrong, the evidence,
/// and the fix.
public enum ConflictText {
    /// "Alice +5.00 at 2026-11-23T08:00:00.000Z (id …)": a cached transaction as evidence.
    public static func transaction(name: String, type: String, amountMinor: Int64, at: String, id: String) -> String {
        "\(name) \(sign(type))\(Money.plain(cents: amountMinor)) at \(at) (id \(id))"
    }

    /// The transactions the server no longer has (described, newest first), as a conflict; nil when there are none.
    public static func lost(_ described: [String]) -> String? {
        guard !described.isEmpty else { return nil }
        let named = described.prefix(3).joined(separator: "; ")
        let more = described.count > 3 ? " and \(described.count - 3) more" : ""
        return
            "The server no longer has \(described.count == 1 ? "a transaction" : "\(described.count) transactions") the cache holds: \(named)\(more). "
            + "The Allowance Tracker API cannot delete a transaction, so the backend lost data (restored from an older backup?). "
            + StoreError.conflictFix
    }

    /// A transaction the server sent under an id the cache holds with other content.
    public static func contradiction(
        id: String, cached: (name: String, type: String, amountMinor: Int64, at: String), server t: Transaction,
        serverName: String
    ) -> String {
        let before = "\(cached.name) \(sign(cached.type))\(Money.plain(cents: cached.amountMinor)) at \(cached.at)"
        let now = "\(serverName) \(sign(t.type.rawValue))\(Money.plain(t.amount)) at \(ISODate.string(t.createdAt))"
        return
            "The server's data contradicts the cache: transaction \(id) is cached as \(before), the server now says \(now). "
            + StoreError.conflictFix
    }

    /// A child's balance on the server that the newest cached transaction (described) did not leave.
    public static func balance(child: String, server: Decimal, newest: String, leftMinor: Int64) -> String {
        "\(child)'s balance on the server is \(Money.plain(server)), but the newest cached transaction (\(newest)) left it at "
            + Money.plain(cents: leftMinor)
    }

    private static func sign(_ type: String) -> String { type == TransactionType.credit.rawValue ? "+" : "-" }
}
