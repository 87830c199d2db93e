import Alerts
import AllowanceAPI
import Config
import Core
import Foundation
import Logging
import Store
import Testing

@testable import Relay

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

    /// What a user met: `daily at 18:49`, started at 18:47, said "first summary at" the next day.
    @Test func aSummaryDueLaterTodayIsDueToday() throws {
        let daily = try #require(SummarySchedule("daily at 18:49"))
        // 18:47 in Paris (winter: UTC+1).
        #expect(daily.nextDue(after: date("2026-11-23T17:47:00Z"), in: paris) == date("2026-11-23T17:49:00Z"))
        #expect(daily.nextDue(after: date("2026-11-23T17:49:00Z"), in: paris) == date("2026-11-24T17:49:00Z"))
        let weekly = try #require(SummarySchedule("weekly on monday at 18:49"))
        #expect(
            weekly.nextDue(after: date("2026-11-23T17:47:00Z"), in: paris) == date("2026-11-23T17:49:00Z"),
            "Monday 23, later today")
    }

    /// Both daylight-saving changes in Paris (29 March and 25 October 2026): a summary keeps its wall-clock time, a
    /// time the spring change skips comes at the next one that exists, one the autumn change repeats comes once.
    @Test func summariesKeepTheirTimeAcrossDaylightSavingChanges() throws {
        let evening = try #require(SummarySchedule("daily at 19:00"))
        // 19:00 is 18:00 UTC before the spring change and 17:00 UTC after it.
        #expect(evening.nextDue(after: date("2026-03-28T18:00:00Z"), in: paris) == date("2026-03-29T17:00:00Z"))
        #expect(
            evening.periodStart(endingAt: date("2026-03-29T17:00:00Z"), in: paris) == date("2026-03-28T18:00:00Z"),
            "a 23-hour day")
        // And back in autumn: a 25-hour day.
        #expect(evening.nextDue(after: date("2026-10-24T17:00:00Z"), in: paris) == date("2026-10-25T18:00:00Z"))
        #expect(evening.lastDue(atOrBefore: date("2026-10-25T17:59:00Z"), in: paris) == date("2026-10-24T17:00:00Z"))
        let night = try #require(SummarySchedule("daily at 02:30"))
        // 29 March: 02:30 does not exist (02:00 -> 03:00): the next existing time, 03:00 CEST = 01:00 UTC.
        #expect(night.nextDue(after: date("2026-03-28T02:00:00Z"), in: paris) == date("2026-03-29T01:00:00Z"))
        // 25 October: 02:30 comes twice (CEST, then CET): once, the first.
        let first = night.nextDue(after: date("2026-10-24T12:00:00Z"), in: paris)
        #expect(first == date("2026-10-25T00:30:00Z"))
        #expect(night.nextDue(after: first, in: paris) == date("2026-10-26T01:30:00Z"), "not again an hour later")
    }

    @Test func eachPeriodIsPlannedOnceAndAMissedOneWhenTheRelayStarts() throws {
        let store = try Store.open(
            path: FileManager.default.temporaryDirectory.appending(path: "summary-\(UUID())/relay.sqlite").path)
        func t(_ amount: String, _ type: TransactionType, _ after: String, _ at: String) -> Transaction {
            Transaction(
                id: UUID(), childId: alice, amount: Decimal(string: amount)!, type: type, description: "x",
                balanceAfter: Decimal(string: after)!,
                createdAt: date(at), createdByName: "Pat")
        }
        try store.storeCaughtUp(
            children: [Child(id: alice, firstName: "Alice", lastName: "E", weeklyAllowance: 10, currentBalance: 33.5)],
            transactions: [
                t("5.00", .credit, "35.00", "2026-11-22T09:00:00Z"), t("1.50", .debit, "33.50", "2026-11-22T12:00:00Z"),
                t("9.00", .credit, "30.00", "2026-11-20T09:00:00Z"),  // the day before: not in the summary
            ])
        let config = try AlertSettings.parse(
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
        let message = config.message(
            id: "s1", kind: .summary, urgency: .normal, event: event, sink: config.sinks[0], markup: true)
        #expect(
            message.text == "Alice, today: 2 transactions, $5.00 in, $1.50 out (savings rate 70.00%). Balance $33.50.")
        #expect(message.title == "Alice: today")
        // The next evening is another period.
        scheduler.plan(rule, schedule, now: date("2026-11-23T18:00:01Z"))
        #expect(try store.deliveries(sink: "chat").count == 2)
    }

    /// Decided: a summary comes at the time its rule names, quiet hours or not (the parent chose that time; a
    /// summary is not an interruption to hold). Everything else a quiet sink gets waits for the end.
    @Test func quietHoursDoNotHoldASummary() throws {
        let config = try AlertSettings.parse(
            """
            sinks:
              chat:
                type: slack
                url: https://hooks.slack.example/x
                quiet_hours: 00:00-23:59
            rules:
              - name: evening
                summary: daily at 19:00
                to: chat
              - event: transaction.created
                to: chat
            """, file: "t.yaml")
        let planner = RulePlanner(rules: config.rules, sinks: config.sinksByName)
        var summary = RelayEvent(
            kind: .summary, at: Date(), childId: alice, childName: "Alice", balance: 3, detail: "today", count: 0,
            total: 0)
        summary.summaryRule = "evening"
        let planned = planner.plan(summary)
        #expect(planned.count == 1 && planned.first?.notBefore == nil, "\(planned)")
        let held = planner.plan(created(transaction("1.00", after: "2.00")))
        #expect(held.count == 1 && held.first?.notBefore != nil, "a transaction in quiet hours waits")
    }

    @Test func aSummaryRuleNeedsAScheduleAndNoEvent() {
        #expect(throws: ConfigErrors.self) {
            try AlertSettings.parse(
                "sinks:\n  c: slack://T/B/X\nrules:\n  - summary: nightly\n    to: c\n", file: "t.yaml")
        }
        #expect(throws: ConfigErrors.self) {
            try AlertSettings.parse(
                "sinks:\n  c: slack://T/B/X\nrules:\n  - summary: daily at 19:00\n    event: transaction.created\n    to: c\n",
                file: "t.yaml")
        }
    }
}
