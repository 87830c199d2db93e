import Alerts
import AllowanceAPI
import Foundation
import GRDB
import StoreContract

extension Store {
    /// The end of the last period summary `rule` was planned for; nil if the rule has never run.
    public func summaryLastDue(rule: String) throws(StoreError) -> Date? {
        try read { db in
            try String.fetchOne(db, sql: "SELECT last_due FROM summary_due WHERE rule = ?", arguments: [rule]).flatMap(
                ISODate.parse)
        }
    }

    /// Plans the summaries of the period ending at `due` (one event per child, through the planner) and records
    /// the period as done, in one transaction. Nothing happens if that period (or a later one) is done already.
    /// With `baselineOnly`, only records the period: a rule seen for the first time starts from now.
    @discardableResult
    public func raiseSummaries(
        rule: String, due: Date, events: [RelayEvent], baselineOnly: Bool = false
    ) throws(StoreError) -> Int {
        try write { db in
            let last = try String.fetchOne(
                db, sql: "SELECT last_due FROM summary_due WHERE rule = ?", arguments: [rule]
            ).flatMap(ISODate.parse)
            if let last, last >= due { return 0 }
            var planned = 0
            if !baselineOnly {
                for event in events { planned += try planDeliveries(db, event) }
            }
            try db.execute(
                sql:
                    "INSERT INTO summary_due (rule, last_due) VALUES (?, ?) ON CONFLICT(rule) DO UPDATE SET last_due = excluded.last_due",
                arguments: [rule, ISO.string(due)])
            return planned
        }
    }
}
