import Alerts
import Config
import Foundation

/// Which alerts reach which sink, as the rules say (or the default ones, when the file has no `rules:`): what
/// `config check` and `status` print, and what reaches nothing, as warnings.
public struct Routing: Sendable, Equatable {
    public struct Route: Sendable, Equatable {
        public var sink: String
        /// "rule NAME: transaction.created, balance.updated" or "rule NAME: summary daily at 19:00"; filtered rules
        /// say so ("only some").
        public var alerts: [String]
    }

    public let routes: [Route]
    public let warnings: [String]

    public init(_ config: AlertSettings) {
        var routes: [Route] = []
        var warnings: [String] = []
        for sink in config.sinks {
            let alerts = config.rules.filter { $0.to.contains(sink.name) }.map(Self.describe)
            routes.append(Route(sink: sink.name, alerts: alerts))
            if alerts.isEmpty {
                warnings.append("sink \(sink.name) gets nothing: no rule sends to it (add it to a rule's `to:`)")
            }
        }
        if !config.defaultRouting, !config.sinks.isEmpty,
            !config.rules.contains(where: { $0.summary == nil && $0.events.contains(.transactionCreated) })
        {
            warnings.append(
                "no rule sends transaction.created: the family hears of no transaction (with `rules:` set, the default routing is off)"
            )
        }
        self.routes = routes
        self.warnings = warnings
    }

    static func describe(_ rule: Rule) -> String {
        let what =
            rule.summary.map { "summary \($0.text)" }
            ?? rule.events.map(\.rawValue).sorted().joined(separator: ", ")
        let filtered =
            !rule.children.isEmpty || rule.type != nil || rule.amountAtLeast != nil || rule.amountBelow != nil
            || rule.descriptionContains != nil
        let name = rule.name.hasPrefix("rule ") ? rule.name : "rule \(rule.name)"  // unnamed rules are "rule 1", ...
        return "\(name): \(what)\(filtered ? " (only some)" : "")"
    }

    /// The table's rows: a sink, then what reaches it.
    public var rows: [[String]] {
        routes.map { ["\($0.sink)", $0.alerts.isEmpty ? "NOTHING" : $0.alerts.joined(separator: "; ")] }
    }
}

extension SummarySchedule {
    /// "daily at 19:00", "weekly on sunday at 18:00": as the rule says it.
    public var text: String {
        let time = String(format: "%02d:%02d", minute / 60, minute % 60)
        switch period {
        case .daily: return "daily at \(time)"
        case .weekly(let weekday): return "weekly on \(Self.weekdays[weekday - 1]) at \(time)"
        }
    }
}
