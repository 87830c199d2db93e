import Alerts
import AllowanceAPI
import Config
import Core
import Foundation
import Logging
import StoreContract

/// Plans each summary rule's messages when they fall due: one per child, with the period's transactions, written
/// to the ledger like every alert (so a summary survives a crash and is sent once). A summary that fell due while
/// the relay was down is planned when it starts; a rule seen for the first time starts from its next due time.
struct SummaryScheduler: Sendable {
    let store: any SummaryLedger & ChildRoster & GoalStore
    let config: AlertSettings
    let stop: StopFlag
    /// Signalled with `stop` (a stop, a reload): ends the wait for the next due time.
    var wakeup = Wakeup()
    let logger: Logger

    var rules: [Rule] { config.rules.filter { $0.summary != nil } }

    func run() async {
        guard !rules.isEmpty else { return }
        while !stop.isSet, !Task.isCancelled {
            let now = Date()
            var next = now.addingTimeInterval(3600)
            for rule in rules {
                guard let schedule = rule.summary else { continue }
                let done = plan(rule, schedule, now: now)
                next = min(
                    next,
                    done ? schedule.nextDue(after: now, in: config.formatting.timeZone) : now.addingTimeInterval(60))
            }
            // Until the next due time, a stop or a reload; by the wall clock again at least each minute, so that a
            // clock set or a machine resumed from sleep is seen within one.
            while !stop.isSet, !Task.isCancelled, Date() < next {
                await wakeup.wait(upTo: .milliseconds(min(60_000, max(10, Int(next.timeIntervalSinceNow * 1000)))))
            }
        }
    }

    /// Plans the rule's latest period if it is not done yet. False: it could not (tried again in a minute).
    @discardableResult
    func plan(_ rule: Rule, _ schedule: SummarySchedule, now: Date) -> Bool {
        let zone = config.formatting.timeZone
        let due = schedule.lastDue(atOrBefore: now, in: zone)
        do {
            guard let last = try store.summaryLastDue(rule: rule.name) else {
                try store.raiseSummaries(rule: rule.name, due: due, events: [], baselineOnly: true)
                logger.info(
                    "summary rule \(rule.name): first summary at \(LocalTime.text(schedule.nextDue(after: now, in: zone), zone))"
                )
                return true
            }
            guard last < due else {
                // Where replicas share the ledger, each scheduler wakes at the due time; one plans, the others say so.
                if last == due, now.timeIntervalSince(due) < 60 {
                    logger.info(
                        "summary rule \(rule.name): another relay planned the messages for the period ending \(ISODate.string(due))"
                    )
                }
                return true
            }
            let events = try summaries(rule, schedule, due: due)
            let planned = try store.raiseSummaries(rule: rule.name, due: due, events: events, baselineOnly: false)
            logger.info(
                "summary rule \(rule.name): \(events.count) child(ren), \(planned) message(s) planned for the period ending \(ISODate.string(due))"
            )
            return true
        } catch {
            logger.error("summary rule \(rule.name): cannot plan the summaries: \(error) (tried again in a minute)")
            return false
        }
    }

    /// One summary event per child the rule covers, from the cache.
    func summaries(_ rule: Rule, _ schedule: SummarySchedule, due: Date) throws(StoreError) -> [RelayEvent] {
        let start = schedule.periodStart(endingAt: due, in: config.formatting.timeZone)
        return try config.summaryEvents(
            store: store, rule: rule, label: schedule.label, from: start, before: due, at: due)
    }
}

extension AlertSettings {
    /// The period under way of the summary rule `name` (the first one without a name; without any, today from
    /// midnight in the family's time zone): the rule, the words for it and when it began.
    public func currentPeriod(
        rule name: String? = nil, now: Date = Date()
    ) throws -> (
        rule: Rule?, label: String, start: Date
    ) {
        let summaryRules = rules.filter { $0.summary != nil }
        let rule: Rule?
        if let name {
            guard let found = summaryRules.first(where: { $0.name == name }) else {
                let names = summaryRules.map(\.name)
                throw RelayError(
                    .noSuchSummary,
                    names.isEmpty
                        ? "No summary rule '\(name)': the configuration has none (a rule with summary: daily at 19:00)."
                        : "No summary rule '\(name)'; the summary rules are \(names.joined(separator: ", ")).")
            }
            rule = found
        } else {
            rule = summaryRules.first
        }
        let schedule = rule?.summary ?? SummarySchedule("daily at 00:00")!
        return (rule, schedule.label + " so far", schedule.lastDue(atOrBefore: now, in: formatting.timeZone))
    }

    /// The summary of the period under way, up to `now`, for each child the rule covers (all children without a
    /// summary rule: then the period is today, from midnight in the family's time zone). For `summary show`.
    public func currentSummaries(
        store: any SummaryLedger & ChildRoster & GoalStore, rule name: String? = nil, now: Date = Date()
    ) throws -> [RelayEvent] {
        let period = try currentPeriod(rule: name, now: now)
        return try summaryEvents(
            store: store, rule: period.rule, label: period.label, from: period.start,
            before: now.addingTimeInterval(0.001), at: now)
    }

    /// One summary event per child `rule` covers (every child without one), of the transactions made from `start` up
    /// to `end`: what the scheduler sends for a period and what `summary show` prints for the period under way.
    func summaryEvents(
        store: any SummaryLedger & ChildRoster & GoalStore, rule: Rule?, label: String, from start: Date,
        before end: Date, at: Date
    ) throws(StoreError) -> [RelayEvent] {
        var events: [RelayEvent] = []
        let goals = Dictionary(
            grouping: try store.goals(child: nil).filter { !$0.item.isPurchased }, by: \.item.childId)
        for child in try store.children() {
            if let rule, !rule.children.isEmpty, !rule.children.contains(child.firstName.lowercased()),
                !rule.children.contains(child.id.lowercased)
            {
                continue
            }
            let list = try store.transactions(child: child.id, since: start, limit: 10_000).filter {
                $0.createdAt < end
            }.reversed()
            let total = list.reduce(Decimal(0)) { $0 + ($1.type == .credit ? $1.amount : -$1.amount) }
            var e = RelayEvent(
                kind: .summary, at: at, childId: child.id, childName: child.firstName, balance: child.currentBalance,
                detail: label,
                count: list.count, total: total, transactions: Array(list))
            e.summaryRule = rule?.name
            e.from = start
            e.goals = goals[child.id].map { rows in
                rows.map {
                    Goal(
                        id: $0.item.id, name: $0.item.name, price: $0.item.price, url: $0.item.url,
                        progress: $0.progress(balance: child.currentBalance))
                }
            }
            events.append(e)
        }
        return events
    }
}

/// A summary that cannot be made as asked (no such rule).
