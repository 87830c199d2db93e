import Alerts
import AllowanceAPI
import Foundation

/// One routing rule: which events (and which of their details) go to which sinks, and how.
public struct Rule: Sendable {
    public var name: String
    public var events: Set<RelayEvent.Kind>
    /// Children by first name or id (lower case); empty: every child.
    public var children: Set<String> = []
    public var type: TransactionType?
    public var amountAtLeast: Decimal?
    public var amountBelow: Decimal?
    /// Case-insensitive text the description must contain.
    public var descriptionContains: String?
    /// For `balance.low`: the threshold (the alert fires when the balance drops below it).
    public var below: Decimal?
    public var to: [String]
    public var urgency: PlannedDelivery.Urgency = .normal
    /// Over the sinks' own quiet hours. Critical alerts are never held.
    public var quietHours: QuietHours?
    public var dedupWindow: TimeInterval?
    /// Fold the transactions of a catch-up (or of quiet hours) into one message per child. Unset: chat and popup
    /// sinks fold (people read them), the generic webhook does not (a machine books each transaction).
    public var digest: Bool?
    /// A scheduled summary per child (`summary: daily at 19:00`) instead of events.
    public var summary: SummarySchedule?

    public init(name: String, events: Set<RelayEvent.Kind>, to: [String]) {
        self.name = name
        self.events = events
        self.to = to
    }
}
