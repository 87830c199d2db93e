import Alerts
import AllowanceAPI
import Config
import Foundation

/// Money and dates as people read them, and the placeholder values of an alert.
extension Formatting {
    /// Exact: Decimal's own format style (NumberFormatter goes through Double: 12,345,678,901,234,567.89 came
    /// out as ...568.00).
    public func money(_ amount: Decimal) -> String {
        amount.formatted(.currency(code: currency).locale(Locale(identifier: locale)))
    }

    /// "+$5.00" for money in, "-$5.00" for money out.
    public func signed(_ amount: Decimal, credit: Bool) -> String {
        (credit ? "+" : "-") + money(amount < 0 ? -amount : amount)
    }

    public func when(_ date: Date) -> String {
        let f = DateFormatter()
        f.locale = Locale(identifier: locale)
        f.dateStyle = .medium
        f.timeStyle = .short
        return f.string(from: date)
    }

    /// The placeholder values for an alert.
    public func values(_ e: RelayEvent, kind: RelayEvent.Kind, sink: String) -> [String: String] {
        var v: [String: String] = ["kind": kind.rawValue, "sink": sink, "when": when(e.at)]
        v["child"] = e.childName ?? e.childId.map { String($0.uuidString.prefix(8)).lowercased() } ?? ""
        if let t = e.transaction {
            v["amount"] = signed(t.amount, credit: t.type == .credit)
            v["description"] = t.description
            v["who"] = t.createdByName.isEmpty ? "someone" : t.createdByName
            v["type"] = t.type == .credit ? "credit" : "debit"
            v["when"] = when(t.createdAt)
        }
        if let b = e.balance ?? e.transaction?.balanceAfter { v["balance"] = money(b) }
        if let p = e.previousBalance { v["previous_balance"] = money(p) }
        if let c = e.count { v["count"] = String(c) }
        if let total = e.total { v["total"] = signed(total, credit: total >= 0) }
        if let list = e.transactions {
            let income = list.filter { $0.type == .credit }.reduce(Decimal(0)) { $0 + $1.amount }
            let spending = list.filter { $0.type == .debit }.reduce(Decimal(0)) { $0 + $1.amount }
            v["credits"] = money(income)
            v["debits"] = money(spending)
            v["savings_rate"] = Self.savingsRate(income: income, spending: spending)
        }
        if let g = e.goal {
            v["item"] = g.name
            v["price"] = money(g.price)
            v["progress"] = "\(g.progress)%"
            if let url = g.url { v["item_url"] = url }
        }
        if let d = e.detail { v["detail"] = d }
        if let s = e.sink { v["sink"] = s }
        if let link = link(for: e) { v["link"] = link }
        return v
    }

    /// The part of the income kept, in percent with two decimals, rounded half away from zero ("70.00%"; "0.00%"
    /// without income): the backend's `savingsRate` (`GET /api/v1/analytics/children/{id}/income-spending`).
    static func savingsRate(income: Decimal, spending: Decimal) -> String {
        guard income > 0 else { return "0.00%" }
        var rate = (income - spending) / income * 100
        var rounded = Decimal()
        NSDecimalRound(&rounded, &rate, 2, .plain)
        return Money.plain(rounded) + "%"
    }

    /// The link for an alert: `template` (a sink's own) or `link`, filled in. A template that names what this alert
    /// lacks (a child for `connection.lost`) leads to the site's front page instead.
    public func link(for e: RelayEvent, template: String? = nil) -> String? {
        guard let template = template ?? link else { return nil }
        let query = CharacterSet.urlPathAllowed.subtracting(CharacterSet(charactersIn: "/?#&="))
        let values: [String: String?] = [
            "{child_id}": e.childId?.lowercased,
            "{child}": e.childName?.addingPercentEncoding(withAllowedCharacters: query),
            "{transaction_id}": e.transaction?.id.lowercased, "{kind}": e.kind.rawValue,
        ]
        var out = template
        for (name, value) in values where out.contains(name) {
            guard let value else {
                guard let url = URLComponents(string: template), let scheme = url.scheme, let host = url.host else {
                    return nil
                }
                return "\(scheme)://\(host)\(url.port.map { ":\($0)" } ?? "")/"
            }
            out = out.replacingOccurrences(of: name, with: value)
        }
        return out
    }
}
