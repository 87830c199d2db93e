import Core
import Foundation
import Store
import StoreContract
import Testing

@testable import RelayDaemon

/// `/healthz`'s verdict, from a real SQLite store and a link state, without HTTP: what a monitor is told and why.
@Suite struct HealthTests {
    func store() throws -> Store {
        try Store.open(
            path: FileManager.default.temporaryDirectory.appending(path: "health-\(UUID())/relay.sqlite").path)
    }

    func reasons(_ answer: (Bool, JSONValue)) -> [String] {
        answer.1["reasons"]?.arrayValue?.compactMap(\.stringValue) ?? []
    }

    @Test func aConnectedRelayOrAStandbyReplicaIsHealthyAndAReconnectingOneIsNot() throws {
        let store = try store()
        let up = StatusEndpoint.health(store: store, link: LinkStatus(state: .connected), unhealthyAfter: 900)
        #expect(up.0 && up.1["status"]?.stringValue == "ok" && reasons(up).isEmpty)
        #expect(
            StatusEndpoint.health(store: store, link: LinkStatus(state: .standby), unhealthyAfter: 900).0,
            "another replica holds the link")
        let down = StatusEndpoint.health(
            store: store, link: LinkStatus(state: .reconnecting, detail: "connection refused"), unhealthyAfter: 900)
        #expect(!down.0 && down.1["status"]?.stringValue == "unhealthy" && down.1["hub"]?.stringValue == "reconnecting")
        #expect(
            reasons(down).count == 1 && reasons(down)[0].hasPrefix("hub reconnecting since ")
                && reasons(down)[0].hasSuffix(": connection refused"))
    }

    /// A failing sink is unhealthy once it has failed for `status.unhealthy_after`; one that dead-letters (the
    /// destination refuses) or is switched off at once: a retry alone will not mend those.
    @Test func aSinkIsUnhealthyAfterFailingLongEnoughOrAtOnceWhenItDeadLetters() throws {
        let store = try store()
        let link = LinkStatus(state: .connected)
        let since = Date(timeIntervalSince1970: 1_800_000_000)
        try store.setSinkHealth("chat", SinkHealth(failingSince: since, lastError: "HTTP 503", deadLettering: false))
        let early = StatusEndpoint.health(
            store: store, link: link, unhealthyAfter: 900, now: since.addingTimeInterval(899))
        #expect(early.0, "failing for less than 15 minutes: still healthy")
        let late = StatusEndpoint.health(
            store: store, link: link, unhealthyAfter: 900, now: since.addingTimeInterval(900))
        #expect(
            !late.0 && reasons(late) == ["sink chat failing since 2027-01-15T08:00:00Z: HTTP 503"], "\(reasons(late))")
        try store.setSinkHealth(
            "chat", SinkHealth(failingSince: since, lastError: "HTTP 400: bad payload", deadLettering: true))
        let refused = StatusEndpoint.health(
            store: store, link: link, unhealthyAfter: 900, now: since.addingTimeInterval(1))
        #expect(
            !refused.0
                && reasons(refused) == ["sink chat dead-letters since 2027-01-15T08:00:00Z: HTTP 400: bad payload"])
        try store.setSinkHealth("chat", nil)
        try store.disableSink("old", reason: "HTTP 410", at: since)
        let off = StatusEndpoint.health(store: store, link: link, unhealthyAfter: 900, now: since)
        #expect(!off.0 && reasons(off) == ["sink old switched off: HTTP 410"], "\(reasons(off))")
    }
}
