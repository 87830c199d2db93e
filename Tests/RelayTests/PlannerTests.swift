import Alerts
import AllowanceAPI
import Config
import Foundation
import Relay
import Store
import Testing

@Suite struct PlannerTests {
    func planner(_ yaml: String, at now: Date = Date()) throws -> RulePlanner {
        let c = try AlertSettings.parse(
            "sinks:\n  chat: slack://T/B/X\n  phone: ntfys://ntfy.sh/t\n" + yaml, file: "relay.yaml")
        return RulePlanner(rules: c.rules, sinks: c.sinksByName, now: { now })
    }

    @Test func filtersOnChildTypeAmountAndDescription() throws {
        let p = try planner(
            """
            rules:
              - event: transaction.created
                child: alice
                type: debit
                amount_at_least: 10
                description_contains: CANDY
                to: chat
            """)
        #expect(p.plan(created(transaction("12.00", after: "5", description: "candy floss"))).map(\.sink) == ["chat"])
        #expect(p.plan(created(transaction("9.99", after: "5", description: "candy"))).isEmpty, "under the amount")
        #expect(p.plan(created(transaction("12.00", .credit, after: "5", description: "candy"))).isEmpty, "a credit")
        #expect(p.plan(created(transaction("12.00", after: "5", description: "books"))).isEmpty, "other text")
        var bob = created(transaction("12.00", after: "5", description: "candy"))
        bob.childName = "Bob"
        bob.childId = UUID()
        #expect(p.plan(bob).isEmpty, "another child")
    }

    @Test func balanceLowFiresOnceWhenTheBalanceCrossesTheThreshold() throws {
        let p = try planner("rules:\n  - event: balance.low\n    below: 5.00\n    to: phone\n    urgency: critical\n")
        #expect(p.plan(created(transaction("3.00", after: "4.00"), previous: "7.00")).map(\.kind) == [.balanceLow])
        #expect(
            p.plan(created(transaction("1.00", after: "3.00"), previous: "4.00")).isEmpty, "already below: no repeat")
        #expect(p.plan(created(transaction("1.00", after: "6.00"), previous: "7.00")).isEmpty, "still above")
        let update = RelayEvent(
            kind: .balanceUpdated, at: Date(), childId: alice, childName: "Alice", balance: 2, previousBalance: 5)
        #expect(p.plan(update).first?.urgency == .critical)
    }

    /// balance.updated is one alert per change of a child's balance, whatever brought the change: the transaction
    /// (which carries the new balance), or a BalanceUpdated that differs from the cache. The BalanceUpdated that
    /// only confirms a transaction's balance is no change and raises nothing.
    @Test func balanceUpdatedFiresOncePerChangeWhateverBroughtIt() throws {
        let p = try planner("rules:\n  - event: balance.updated\n    to: chat\n")
        #expect(p.mayPlan(for: .transactionCreated), "transactions are planned for balance.updated rules")
        #expect(p.plan(created(transaction("3.00", after: "4.00"), previous: "7.00")).map(\.kind) == [.balanceUpdated])
        let confirming = RelayEvent(
            kind: .balanceUpdated, at: Date(), childId: alice, childName: "Alice", balance: 4, previousBalance: 4)
        #expect(p.plan(confirming).isEmpty)
        let news = RelayEvent(
            kind: .balanceUpdated, at: Date(), childId: alice, childName: "Alice", balance: 9, previousBalance: 4)
        #expect(p.plan(news).map(\.kind) == [.balanceUpdated])
        #expect(
            p.plan(created(transaction("3.00", after: "4.00"), caughtUp: true)).isEmpty,
            "a catch-up says its balances once, at its end")
    }

    @Test func aRecoveredBalanceClosesTheLowBalancePopupAndTellsNoOneElse() throws {
        let p = try planner(
            "  popups: {type: desktop}\nrules:\n  - event: balance.low\n    below: 5.00\n    to: [phone, popups]\n")
        let low = p.plan(created(transaction("3.00", after: "4.00"), previous: "7.00"))
        #expect(Set(low.map(\.sink)) == ["phone", "popups"] && low.allSatisfy { $0.kind == .balanceLow })
        let back = p.plan(created(transaction("3.00", .credit, after: "7.00"), previous: "4.00"))
        #expect(back.map(\.sink) == ["popups"] && back.map(\.kind) == [.balanceRecovered])
    }

    @Test func caughtUpTransactionsAreFoldableAndGatherBriefly() throws {
        let now = Date()
        let p = try planner("rules:\n  - event: transaction.created\n    to: [chat, phone]\n", at: now)
        let live = p.plan(created(transaction("1", after: "5")))
        #expect(live.count == 2 && live.allSatisfy { !$0.digest && $0.notBefore == nil })
        let caught = p.plan(created(transaction("1", after: "5"), caughtUp: true))
        #expect(caught.allSatisfy { $0.digest && $0.notBefore == now.addingTimeInterval(3) })
    }

    /// A machine behind the generic webhook books each transaction: it gets them one by one unless a rule asks
    /// for digests; chat sinks fold a catch-up for the people reading them.
    @Test func theGenericWebhookGetsEachCaughtUpTransactionUnlessTheRuleAsksForDigests() throws {
        let yaml =
            "  books: {type: webhook, url: 'http://127.0.0.1:9/h'}\nrules:\n  - event: transaction.created\n    to: [chat, books]\n"
        let c = try AlertSettings.parse("sinks:\n  chat: slack://T/B/X\n" + yaml, file: "relay.yaml")
        let caught = RulePlanner(rules: c.rules, sinks: c.sinksByName).plan(
            created(transaction("1", after: "5"), caughtUp: true))
        #expect(caught.first { $0.sink == "chat" }?.digest == true)
        #expect(caught.first { $0.sink == "books" }?.digest == false)
        let asked = try AlertSettings.parse(
            "sinks:\n  chat: slack://T/B/X\n" + yaml + "    digest: true\n", file: "relay.yaml")
        let folded = RulePlanner(rules: asked.rules, sinks: asked.sinksByName).plan(
            created(transaction("1", after: "5"), caughtUp: true))
        #expect(folded.allSatisfy { $0.digest }, "digest: true folds for the webhook too")
    }

    @Test func quietHoursHoldUntilTheyEndButCriticalAlertsBypass() throws {
        var utc = Calendar(identifier: .gregorian)
        utc.timeZone = .current
        let night = utc.date(from: DateComponents(year: 2026, month: 11, day: 22, hour: 23, minute: 30))!
        let p = try planner(
            """
            rules:
              - event: transaction.created
                to: chat
                quiet_hours: 22:00-07:00
              - event: balance.low
                below: 5
                to: chat
                urgency: critical
                quiet_hours: 22:00-07:00
            """, at: night)
        let planned = p.plan(created(transaction("3.00", after: "4.00"), previous: "7.00"))
        let held = try #require(planned.first { $0.kind == .transactionCreated })
        #expect(held.notBefore == utc.date(from: DateComponents(year: 2026, month: 11, day: 23, hour: 7, minute: 0)))
        #expect(held.digest, "held alerts fold into one digest when the quiet hours end")
        let urgent = try #require(planned.first { $0.kind == .balanceLow })
        #expect(urgent.notBefore == nil)
    }

    @Test func theFirstRuleForAKindAndSinkWinsAndDedupKeysAreSet() throws {
        let p = try planner(
            """
            rules:
              - name: urgent
                event: transaction.created
                amount_at_least: 50
                to: chat
                urgency: critical
                dedup_minutes: 10
              - name: all
                event: transaction.created
                to: [chat, phone]
            """)
        let planned = p.plan(created(transaction("60", after: "5")))
        #expect(planned.map(\.sink) == ["chat", "phone"])
        #expect(planned[0].rule == "urgent" && planned[0].urgency == .critical && planned[0].dedupWindow == 600)
        #expect(planned[0].dedupKey == "urgent|transaction.created|\(alice.uuidString.lowercased())")
    }

    @Test func aDisabledSinkIsNotToldAboutItself() throws {
        let p = try planner("rules:\n  - event: delivery.disabled\n    to: [chat, phone]\n")
        let e = RelayEvent(kind: .deliveryDisabled, at: Date(), detail: "HTTP 410", sink: "chat")
        #expect(p.plan(e).map(\.sink) == ["phone"])
    }
}
