import Foundation

/// What a catch-up found goes out before what happened after it. While a sink gathers a child's caught-up
/// transactions into a digest (until the digest's due time), a live alert for that child on that sink waits until
/// just after it, so the digest does not arrive after newer alerts with an older balance; a critical alert does not
/// wait. A value: the store keeps one and asks it for each planned delivery, inside the transaction that plans it.
public struct DigestGathering: Sendable {
    /// Per sink and child: until when a digest gathers.
    private var until: [String: Date] = [:]

    public init() {}

    /// When `planned` (a delivery of `event`) falls due.
    public mutating func due(_ planned: PlannedDelivery, for event: RelayEvent, now: Date) -> Date {
        var due = planned.notBefore ?? now
        guard let child = event.childId else { return due }
        let key = "\(planned.sink)|\(child.lowercased)"
        if event.caughtUp, planned.digest, let end = planned.notBefore {
            until[key] = max(until[key] ?? end, end)
        } else if !event.caughtUp, planned.urgency != .critical, let end = until[key] {
            if end > now { due = max(due, end.addingTimeInterval(0.01)) } else { until[key] = nil }
        }
        return due
    }
}
