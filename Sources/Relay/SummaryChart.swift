import Alerts
import Charts
import Config
import Foundation

extension AlertSettings {
    /// The picture a summary carries: the child's balance over the period (from the balance before its first
    /// transaction, through each transaction's balance after it), the goals it names as lines. A summary written
    /// before summaries said their period is taken as the day before it.
    public func chart(for e: RelayEvent) -> BalanceChart {
        let start = e.from ?? e.at.addingTimeInterval(-86400)
        let list = e.transactions ?? []
        let opening =
            list.first.map { t in t.balanceAfter + (t.type == .credit ? -t.amount : t.amount) } ?? e.balance ?? 0
        let points = [(at: start, balance: opening)] + list.map { (at: $0.createdAt, balance: $0.balanceAfter) }
        let title = [e.childName, e.detail].compactMap { $0 }.joined(separator: ", ")
        return BalanceChart(
            title: title, points: points.map { ($0.at, Self.double($0.balance)) }, from: start, to: e.at,
            goals: (e.goals ?? []).map { BalanceChart.Goal(name: $0.name, price: Self.double($0.price)) })
    }

    /// Money as a drawing coordinate (the text keeps the exact Decimal).
    private static func double(_ d: Decimal) -> Double { NSDecimalNumber(decimal: d).doubleValue }
}
