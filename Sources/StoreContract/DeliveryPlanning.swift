import Alerts
import AllowanceAPI
import Core
import Foundation
import Synchronization

/// How an event's deliveries are planned, the one policy both stores follow inside the transaction that stores the
/// event: the rules' plans; a plan skipped when its dedup key was planned on the same sink within its window; its due
/// time after a catch-up's digest gathering for the same child and sink; muted rows kept as muted; the alert written
/// once per kind, with the family's currency; a time-ordered id (the `webhook-id` a receiver deduplicates on). What a
/// backend writes is only the row (`write`) and the dedup look-up (`seen`).
public enum DeliveryPlanning {
    /// The deliveries planned for `event`, written in order. `seen(sink, key, since)`: whether a delivery with that
    /// dedup key was planned on that sink since then.
    public static func plan<E: Error>(
        _ event: RelayEvent, planner: any AlertPlanner, gathering: borrowing Mutex<DigestGathering>, now: Date,
        seen: (_ sink: String, _ dedupKey: String, _ since: Date) throws(E) -> Bool,
        write: (_ delivery: Delivery, _ dedupKey: String?) throws(E) -> Void
    ) throws(E) -> [Delivery] {
        guard planner.mayPlan(for: event.kind) else { return [] }
        var planned: [Delivery] = []
        // The alert of each kind planned, written once and boxed once (each delivery of it shares the box): mostly
        // one kind, so a list, not a dictionary.
        var alerts: [(kind: RelayEvent.Kind, text: String, value: Delivery.CarriedAlert)] = []
        for p in planner.plan(event) {
            if let key = p.dedupKey, let window = p.dedupWindow, try seen(p.sink, key, now.addingTimeInterval(-window))
            {
                continue
            }
            // What a catch-up found comes before what happened after it (the live alert waits for the digest).
            let due = gathering.withLock { $0.due(p, for: event, now: now) }
            let index =
                alerts.firstIndex { $0.kind == p.kind }
                ?? {
                    var e = event
                    e.kind = p.kind
                    alerts.append((p.kind, e.jsonText(currency: planner.currency), Delivery.CarriedAlert(e)))
                    return alerts.count - 1
                }()
            var d = Delivery(
                id: UUID.timeOrdered(at: now).lowercased(after: "dlv_"), sink: p.sink, rule: p.rule, kind: p.kind,
                childId: event.childId, urgency: p.urgency, alert: alerts[index].text, digest: p.digest,
                state: p.muted ? .muted : .pending, attempts: 0, nextAttemptAt: due, lastError: p.muted ? "muted" : nil,
                createdAt: now, traceParent: event.traceParent)
            d.carriedAlert = alerts[index].value
            try write(d, p.dedupKey)
            planned.append(d)
        }
        return planned
    }
}

extension Delivery {
    /// The delivery that replaces `parts` (one child's, on one sink) with one digest message: its own time-ordered
    /// id, the sink and rule of the first part, critical when any part is, the digest event as its alert, and the
    /// newest part's trace (its send joins that trace). Both stores write this row and mark the parts merged into it.
    public static func digest(
        of parts: [Delivery], event: RelayEvent, currency: String?, at now: Date
    ) -> Delivery {
        precondition(!parts.isEmpty)
        let first = parts[0]
        return Delivery(
            id: UUID.timeOrdered(at: now).lowercased(after: "dlv_"), sink: first.sink, rule: first.rule, kind: .digest,
            childId: event.childId, urgency: parts.contains { $0.urgency == .critical } ? .critical : first.urgency,
            alert: event.jsonText(currency: currency), digest: false, state: .pending, attempts: 0, nextAttemptAt: now,
            createdAt: now, traceParent: parts.lazy.compactMap(\.traceParent).last, carried: event)
    }
}
