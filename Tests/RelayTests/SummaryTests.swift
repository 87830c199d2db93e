import Alerts
import AllowanceAPI
import Foundation
import Logging
@testable import Relay
import Store
import Testing

/// Scheduled summaries: the schedule's arithmetic in the family's time zone, and the scheduler against a real
/// SQLite store (planned once per period, also when it fell due while the relay was down).
@Suite struct SummaryTests {
    let paris = TimeZone(identifier: "Europe/Paris")!

    func date(_ text: String) -> Date { ISODate.parse(text)! }

    @Test func schedulesAreReadAndRefused() {
        #expect(SummarySchedule("daily at 19:00") == SummarySchedule("Daily at 19:00"))
        #expect(SummarySchedule("weekly on sunday at 18:30")?.period == .weekly(weekday: 1))
        #expect(SummarySchedule("weekly on fri at 08:00")?.period == .weekly(weekday: 6))
        #expect(SummarySchedule("daily at 25:00") == nil)
        #expect(SummarySchedule("hourly") == nil)
        #expect(SummarySchedule("weekly on someday at 10:00") == nil)
    }

    @Test func dueTimesFollowTheFamilysTimeZone() throws {
        let daily = try #require(SummarySchedule("daily at 19:00"))
        // 19:00 in Paris is 18:00 UTC in winter.
        #expect(daily.lastDue(atOrBefore: date("2026-11-23T17:30:00Z"), in: paris) == date("2026-11-22T18:00:00Z"))
        #expect(daily.lastDue(atOrBefore: date("2026-11-23T18:00:00Z"), in: paris) == date("2026-11-23T18:00:00Z"))
        #expect(daily.nextDue(after: date("2026-11-23T18:00:00Z"), in: paris) == date("2026-11-24T18:00:00Z"))
        let weekly = try #require(SummarySchedule("weekly on sunday at 18:00"))
        // Monday 23 November 2026: the last Sunday was the 22nd.
        #expect(weekly.lastDue(atOrBefore: date("2026-11-23T10:00:00Z"), in: paris) == date("2026-11-22T17:00:00Z"))
        #expect(weekly.nextDue(after: date("2026-11-23T10:00:00Z"), in: paris) == date("2026-11-29T17:00:00Z"))
        #expect(weekly.periodStart(endingAt: date("2026-11-22T17:00:00Z"), in: paris) == date("2026-11-15T17:00:00Z"))
    }

    @Test func eachPeriodIsPlannedOnceAndAMissedOneWhenTheRelayStarts() throws {
        let store = try Store.open(path: FileManager.default.temporaryDirectory.appending(path: "summary-\(UUID())/relay.sqlite").path)
        func t(_ amount: String, _ type: TransactionType, _ after: String, _ at: String) -> Transaction {
            Transaction(
                id: UUID(), childId: alice, amount: Decimal(string: amount)!, type: type, description: "x", balanceAfter: Decimal(string: after)!,
                createdAt: date(at), createdByName: "Pat")
        }
        try store.storeCaughtUp(
            children: [Child(id: alice, firstName: "Alice", lastName: "E", weeklyAllowance: 10, currentBalance: 33.5)],
            transactions: [
                t("5.00", .credit, "35.00", "2026-11-22T09:00:00Z"), t("1.50", .debit, "33.50", "2026-11-22T12:00:00Z"),
                t("9.00", .credit, "30.00", "2026-11-20T09:00:00Z"),  // the day before: not in the summary
            ])
        let config = try RelayConfig.parse(
            """
            relay:
              time_zone: Europe/Paris
            sinks:
              chat:
                type: slack
                url: https://hooks.slack.example/x
            rules:
              - name: evening
                summary: daily at 19:00
                to: chat
            """, file: "t.yaml")
        store.setPlanner(RulePlanner(rules: config.rules, sinks: config.sinksByName, currency: "USD"))
        let scheduler = SummaryScheduler(store: store, config: config, stop: StopFlag(), logger: Logger(label: "test"))
        let rule = try #require(config.rules.first)
        let schedule = try #require(rule.summary)
        // First sight: a baseline, nothing sent for the period before the rule existed.
        #expect(scheduler.plan(rule, schedule, now: date("2026-11-21T20:00:00Z")))
        #expect(try store.deliveries(sink: "chat").isEmpty)
        // The relay was down over the evening of the 22nd; it starts on the 23rd at noon: one summary, for the 22nd.
        scheduler.plan(rule, schedule, now: date("2026-11-23T11:00:00Z"))
        scheduler.plan(rule, schedule, now: date("2026-11-23T11:00:05Z"))
        let planned = try store.deliveries(sink: "chat")
        #expect(planned.count == 1 && planned.first?.kind == .summary)
        let event = try #require(try planned.first?.event)
        #expect(event.count == 2 && event.total == Decimal(string: "3.50"))
        let message = config.message(id: "s1", kind: .summary, urgency: .normal, event: event, sink: config.sinks[0], markup: true)
        #expect(message.text == "Alice, today: 2 transactions, $5.00 in, $1.50 out. Balance $33.50.")
        #expect(message.title == "Alice: today")
        // The next evening is another period.
        scheduler.plan(rule, schedule, now: date("2026-11-23T18:00:01Z"))
        #expect(try store.deliveries(sink: "chat").count == 2)
    }

    @Test func aSummaryRuleNeedsAScheduleAndNoEvent() {
        #expect(throws: ConfigErrors.self) {
            try RelayConfig.parse("sinks:\n  c: slack://T/B/X\nrules:\n  - summary: nightly\n    to: c\n", file: "t.yaml")
        }
        #expect(throws: ConfigErrors.self) {
            try RelayConfig.parse("sinks:\n  c: slack://T/B/X\nrules:\n  - summary: daily at 19:00\n    event: transaction.created\n    to: c\n", file: "t.yaml")
        }
    }
}
