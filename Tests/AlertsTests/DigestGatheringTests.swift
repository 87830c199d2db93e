import Alerts
import Foundation
import Testing

/// The digest of what a catch-up found comes before the live alerts after it, per sink and child.
@Suite struct DigestGatheringTests {
    let child = UUID(uuidString: "11111111-1111-4111-8111-111111111111")!
    let other = UUID(uuidString: "22222222-2222-4222-8222-222222222222")!
    let now = Date(timeIntervalSince1970: 1_764_000_000)

    func planned(
        sink: String = "chat", digest: Bool = false, notBefore: Date? = nil, urgency: PlannedDelivery.Urgency = .normal
    ) -> PlannedDelivery {
        var p = PlannedDelivery(sink: sink, rule: "r", kind: .transactionCreated, urgency: urgency)
        p.digest = digest
        p.notBefore = notBefore
        return p
    }

    func event(_ child: UUID, caughtUp: Bool) -> RelayEvent {
        RelayEvent(kind: .transactionCreated, at: now, childId: child, caughtUp: caughtUp)
    }

    @Test func aLiveAlertWaitsForTheDigestGatheringOnItsSinkAndChild() {
        var g = DigestGathering()
        let end = now.addingTimeInterval(3)
        #expect(g.due(planned(digest: true, notBefore: end), for: event(child, caughtUp: true), now: now) == end)
        #expect(
            g.due(planned(), for: event(child, caughtUp: false), now: now) == end.addingTimeInterval(0.01),
            "just after the digest")
        #expect(
            g.due(planned(urgency: .critical), for: event(child, caughtUp: false), now: now) == now,
            "a critical alert does not wait")
        #expect(g.due(planned(), for: event(other, caughtUp: false), now: now) == now, "another child does not wait")
        #expect(g.due(planned(sink: "phones"), for: event(child, caughtUp: false), now: now) == now, "nor another sink")
        let later = end.addingTimeInterval(1)
        #expect(
            g.due(planned(), for: event(child, caughtUp: false), now: later) == later,
            "once the digest went, nothing waits")
    }
}
