import Alerts
import AllowanceAPI
import Foundation
import StoreContract
import Synchronization
import TestSupport
import Testing

/// The storage contract, once, on both stores: what a relay keeps beside its cache (the chat message a balance
/// edits, the mutes, the summaries' periods, the plans) behaves the same on the SQLite file and on PostgreSQL, and is
/// the same for every handle on the same data (two processes on one file, two replicas on one database).
@Suite(.timeLimit(.minutes(2))) struct RelayStoreContractTests {
    let alice = Child(id: UUID(), firstName: "Alice", lastName: "A", weeklyAllowance: 5, currentBalance: 12)
    let bob = Child(id: UUID(), firstName: "Bob", lastName: "B", weeklyAllowance: 5, currentBalance: 3)

    func at(_ text: String) -> Date { ISODate.parse(text)! }

    @Test(arguments: Backend.allCases)
    func aMessagePostedByOneRelayIsEditedByTheNext(_ backend: Backend) async throws {
        let stores = try await backend.handles(2)
        defer { backend.close(stores) }
        let (first, next) = (stores[0], stores[1])
        let subject = "balance:\(alice.id.lowercased)"
        #expect(try next.sentMessage(sink: "chat", subject: subject) == nil)
        let posted = SentMessage(ref: "1001", postedAt: at("2026-11-26T08:00:00Z"))
        try first.setSentMessage(sink: "chat", subject: subject, posted)
        #expect(
            try next.sentMessage(sink: "chat", subject: subject) == posted, "the next relay edits what the first posted"
        )
        #expect(try next.sentMessage(sink: "other", subject: subject) == nil, "per sink")
        let reposted = SentMessage(ref: "1002", postedAt: at("2026-11-26T09:00:00Z"))
        try next.setSentMessage(sink: "chat", subject: subject, reposted)
        #expect(try first.sentMessage(sink: "chat", subject: subject) == reposted)
        try first.setSentMessage(sink: "chat", subject: subject, nil)
        #expect(try next.sentMessage(sink: "chat", subject: subject) == nil, "a message the chat lost is forgotten")
    }

    @Test(arguments: Backend.allCases)
    func aMuteSetThroughOneHandleHoldsOnEveryOneAndEndsByItself(_ backend: Backend) async throws {
        let stores = try await backend.handles(2)
        defer { backend.close(stores) }
        let (a, b) = (stores[0], stores[1])
        let now = at("2026-11-26T10:00:00Z")
        try a.mute(Mute(sink: "popups", childId: alice.id, until: now.addingTimeInterval(3600)))
        try a.mute(Mute(sink: Mute.everySink, childId: bob.id, until: now.addingTimeInterval(60)))
        let running = try b.mutes(at: now).sorted { $0.until < $1.until }
        #expect(running.map(\.childId) == [bob.id, alice.id])
        #expect(running.map(\.sink) == [Mute.everySink, "popups"])
        // A later mute of the same pair replaces the earlier one.
        try b.mute(Mute(sink: "popups", childId: alice.id, until: now.addingTimeInterval(7200)))
        #expect(try a.mutes(at: now).first { $0.childId == alice.id }?.until == now.addingTimeInterval(7200))
        #expect(try a.mutes(at: now.addingTimeInterval(120)).map(\.childId) == [alice.id], "Bob's mute has ended")
        #expect(try b.unmute(child: alice.id, sink: "chat") == 0, "no mute on that sink")
        #expect(try b.unmute(child: alice.id, sink: nil) == 1)
        #expect(try a.mutes(at: now).map(\.childId) == [bob.id], "Alice's lifted; Bob's runs at that time")
        #expect(try a.mutes(at: now.addingTimeInterval(120)).isEmpty, "and has ended since")
    }

    @Test(arguments: Backend.allCases)
    func aSummaryPeriodIsPlannedOnceWhenTwoRelaysRaiseItAtOnce(_ backend: Backend) async throws {
        let stores = try await backend.handles(2, planner: EveryEvent())
        defer { backend.close(stores) }
        try backend.seed(stores[0], children: [alice], transactions: [])
        let (first, second) = (at("2026-11-25T18:00:00Z"), at("2026-11-26T18:00:00Z"))
        #expect(try stores[1].summaryLastDue(rule: "evening") == nil, "a rule never run")
        #expect(try stores[0].raiseSummaries(rule: "evening", due: first, events: [], baselineOnly: true) == 0)
        #expect(try stores[1].summaryLastDue(rule: "evening") == first)
        let summary = RelayEvent(kind: .summary, at: second, childId: alice.id, childName: "Alice", balance: 12)
        // Both schedulers wake for the same period together: one plans it, the other finds it done.
        let planned = try atOnce(
            stores.map { store in
                { try store.raiseSummaries(rule: "evening", due: second, events: [summary], baselineOnly: false) }
            })
        #expect(planned.sorted() == [0, 1])
        #expect(try stores[0].deliveryCounts() == ["hook": ["pending": 1]])
        #expect(try stores[1].summaryLastDue(rule: "evening") == second)
        #expect(
            try stores[1].raiseSummaries(rule: "evening", due: first, events: [summary], baselineOnly: false) == 0,
            "an older period")
        #expect(try stores[0].deliveryCounts() == ["hook": ["pending": 1]])
    }

    /// What `/metrics` reads: the deliveries still owed and the dead, by sink and state; the delivered ones only in
    /// the counts of every state.
    @Test(arguments: Backend.allCases)
    func theOwedCountsLeaveOutWhatWasDelivered(_ backend: Backend) async throws {
        let stores = try await backend.handles(1, planner: EveryEvent())
        defer { backend.close(stores) }
        let store = stores[0]
        for n in 0..<4 { try store.raise(RelayEvent(kind: .connectionLost, at: Date(), detail: "\(n)")) }
        let due = try store.dueDeliveries(sink: "hook", at: Date().addingTimeInterval(1), limit: 10, excluding: [])
        #expect(due.count == 4)
        try store.record([(due[0].id, .done(at: Date())), (due[1].id, .gaveUp(reason: "410 Gone"))])
        // The two left are pending in a file; a shared ledger marks the rows a replica has claimed in flight.
        let owed = try #require(try store.owedDeliveryCounts()["hook"])
        #expect((owed["pending"] ?? 0) + (owed["in_flight"] ?? 0) == 2 && owed["dead"] == 1)
        #expect(owed["delivered"] == nil)
        let all = try #require(try store.deliveryCounts()["hook"])
        #expect(all["delivered"] == 1 && all["dead"] == 1 && all.filter { $0.key != "delivered" } == owed)
    }

    @Test(arguments: Backend.allCases)
    func aPeriodsTransactionsAreReadNewestFirstFromItsStart(_ backend: Backend) async throws {
        let stores = try await backend.handles(1)
        defer { backend.close(stores) }
        let times = ["2026-11-24T09:00:00Z", "2026-11-25T09:00:00Z", "2026-11-26T09:00:00Z"].map(at)
        var balance: Decimal = 9
        let made = times.enumerated().map { n, time in
            balance += 1
            return Transaction(
                id: UUID(), childId: alice.id, amount: 1, type: .credit, description: "chore \(n)",
                balanceAfter: balance,
                createdAt: time, createdByName: "Parent")
        }
        try backend.seed(stores[0], children: [alice, bob], transactions: made)
        let children = try stores[0].children()
        #expect(Set(children.map(\.id)) == [alice.id, bob.id])
        #expect(
            children.map { "\($0.firstName) \($0.lastName) \($0.weeklyAllowance) \($0.currentBalance)" }.sorted()
                == ["Alice A 5 12", "Bob B 5 3"], "the children whole, as the catch-up listed them")
        let since = try stores[0].transactions(child: alice.id, since: times[1], limit: 100)
        #expect(since.map(\.description) == ["chore 2", "chore 1"])
        #expect(since.map(\.amount) == [1, 1])
        #expect(try stores[0].transactions(child: bob.id, since: nil, limit: 100).isEmpty)
        #expect(try stores[0].transactions(child: alice.id, since: nil, limit: 1).map(\.description) == ["chore 2"])
    }

    @Test(arguments: Backend.allCases)
    func anEventOfTheRelaysOwnIsPlannedByTheRulesInstalled(_ backend: Backend) async throws {
        let stores = try await backend.handles(2, planner: EveryEvent())
        defer { backend.close(stores) }
        let lost = RelayEvent(kind: .connectionLost, at: Date(), detail: "no connection for 5 minutes")
        #expect(try stores[0].raise(lost) == 1)
        #expect(try stores[1].deliveryCounts() == ["hook": ["pending": 1]])
        let due = try stores[1].dueDeliveries(sink: "hook", at: Date().addingTimeInterval(1), limit: 10, excluding: [])
        #expect(due.map(\.kind) == [.connectionLost])
        #expect(try due.first?.event.detail == "no connection for 5 minutes")
        stores[0].setPlanner(nil, onPlanned: nil)
        #expect(try stores[0].raise(lost) == 0, "no rules, nothing planned")
    }
}
