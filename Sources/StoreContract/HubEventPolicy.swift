import Alerts
import AllowanceAPI
import Foundation

/// A child as a burst of hub events sees it: read once, changed in memory, its balance written once at the end.
public struct BurstChild: Sendable, Equatable {
    public var name: String
    /// The server's balance plus the writes made here and not yet confirmed (minor units): what a parent sees.
    public var balance: Int64
    /// Those writes' effect on the balance, and how many there are.
    public var pending: Int64
    public var waiting: Int
    /// The burst changed the balance: it is written at the end.
    public var changed = false

    public init(name: String, balance: Int64, pending: Int64, waiting: Int) {
        self.name = name
        self.balance = balance
        self.pending = pending
        self.waiting = waiting
    }
}

/// What one hub event does to a child, the policy both stores apply inside the transaction that stores the event;
/// the rows (the transaction stored, the stand-in of a write made here dropped, the newest stored transaction read)
/// are the backend's.
public enum HubEventPolicy {
    /// A new transaction: whether it shows that the cache missed something (the balance before it is not the cached
    /// one, counted without the writes made here), and the child after it. `echoed`: what dropping the local stand-in
    /// of this very write took off the pending effect (0: not a write of ours), found by the caller after the gap.
    public static func transaction(
        _ cents: TransactionCents, child: BurstChild, echoed: Int64
    ) -> (gap: Bool, child: BurstChild) {
        var after = child
        let gap = child.balance - child.pending != cents.balanceBefore
        if echoed != 0 {
            after.pending -= echoed
            after.waiting -= 1
        }
        after.balance = cents.balanceAfter + after.pending
        after.changed = true
        return (gap, after)
    }

    /// A BalanceUpdated: the server's balance wins (it is calculated there), with the writes still waiting here on
    /// top; a gap when the newest stored transaction (`latest`, minor units; nil: none) left another balance. Also
    /// the balance before it, as the server had it, for the alert.
    public static func balance(
        _ server: Int64, child: BurstChild, latest: Int64?
    ) -> (gap: Bool, child: BurstChild, previous: Int64) {
        var after = child
        after.balance = server + child.pending
        after.changed = true
        return (latest != nil && latest != server, after, child.balance - child.pending)
    }

    /// Whether a BalanceUpdated is recorded by the event right before it in the burst: the hub sends each
    /// transaction's new balance right behind it, and when that transaction is stored (now or before) with this
    /// balance after it, its row says what the balance does. Any other balance is the only record of itself.
    public static func isRecorded(
        _ balance: HubEvent, byPrevious previous: HubEvent?, storedAs result: ApplyResult?
    ) -> Bool {
        guard case .balanceUpdated(let child, let server) = balance, case .transactionCreated(let t)? = previous,
            t.childId == child, t.balanceAfter == server
        else { return false }
        switch result {
        case .stored?, .duplicate?: return true
        default: return false
        }
    }

    /// The alerts they plan: the event as the relay says it, with the balance before it. `cents`: the transaction's
    /// (`keeping(_:now:)`).
    public static func alert(
        _ t: Transaction, cents: TransactionCents, name: String,
        at now: Date, traceParent: String?
    ) -> RelayEvent {
        var alert = RelayEvent(
            kind: .transactionCreated, at: now, childId: t.childId, childName: name, transaction: t,
            balanceCents: cents.balanceAfter, previousBalanceCents: cents.balanceBefore)
        alert.traceParent = traceParent
        return alert
    }

    /// The alert for a BalanceUpdated kept (its balance in cents; one with more decimals is set aside instead).
    public static func alert(
        balance: Int64, child: UUID, name: String, previous: Int64, at now: Date, traceParent: String?
    ) -> RelayEvent {
        var alert = RelayEvent(
            kind: .balanceUpdated, at: now, childId: child, childName: name, balanceCents: balance,
            previousBalanceCents: previous)
        alert.traceParent = traceParent
        return alert
    }

    /// A server transaction set aside (the row to list), or kept with its amounts in cents.
    public enum Keeping {
        case setAside(RejectedRow)
        case keep(TransactionCents)
    }

    /// What a store does with a server transaction (from the hub, a catch-up, or the answer to a write): sets it
    /// aside (`Transaction.problem` says why), or keeps it with its amounts in cents, the only figures a store writes
    /// for it. Both stores ask here, so that no row is ever written without its cents.
    public static func keeping(_ t: Transaction, now: Date) -> Keeping {
        if let row = setAside(t, now: now) { return .setAside(row) }
        do {
            return .keep(try t.cents())
        } catch {
            // `problem` names money without cents first, so this is not reached; were it, the row is set aside.
            return .setAside(
                RejectedRow(
                    id: t.id.lowercased, childId: t.childId, reason: error.message,
                    payload: HubEvent.transactionCreated(t).jsonText))
        }
    }

    /// A transaction the relay cannot keep (`Transaction.problem`), as the row it is set aside as; nil: it can be.
    private static func setAside(_ t: Transaction, now: Date) -> RejectedRow? {
        guard let problem = t.problem(now: now) else { return nil }
        return RejectedRow(
            id: t.id.lowercased, childId: t.childId, reason: problem, payload: HubEvent.transactionCreated(t).jsonText)
    }

    /// A BalanceUpdated whose balance has no value in cents (`Money.minorUnits`: more than two decimals) cannot be
    /// kept: it is set aside as a transaction would be (listed by `status`, alerted once for each such figure), the
    /// cached balance stays, and the rest of the burst is stored.
    public static func setAside(balance: Decimal, child: UUID) -> RejectedRow {
        RejectedRow(
            id: "balance:\(child.lowercased):\(balance)", childId: child,
            reason: "its balance \(balance) has more than two decimals",
            payload: HubEvent.balanceUpdated(childId: child, balance: balance).jsonText,
            subject: "balance for child \(child.lowercased)")
    }

    /// What storing a hub event set aside answers: the reason in words, and whether it was set aside just now.
    public static func rejected(_ row: RejectedRow, first: Bool) -> ApplyResult {
        .rejected(reason: "\(row.subject): \(row.reason)", first: first)
    }

    /// The `sync.rejected` alert for a row set aside the first time.
    public static func alert(
        setAside row: RejectedRow, childName: String?, at now: Date, traceParent: String?
    )
        -> RelayEvent
    {
        var alert = RelayEvent(
            kind: .syncRejected, at: now, childId: row.childId, childName: childName,
            detail: "the server's \(row.subject) was not stored: \(row.reason)")
        alert.traceParent = traceParent
        return alert
    }
}
