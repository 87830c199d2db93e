import Alerts
import AllowanceAPI
import Foundation
import StoreContract

/// A message template: text with `{placeholder}`s. Parsed when the config is loaded, so an unknown placeholder is
/// a config error, not a surprise at 3 a.m. Values are escaped for the destination; the template's own text is not.
public struct Template: Sendable, Equatable {
    public static let placeholders: Set<String> = [
        "child", "amount", "balance", "previous_balance", "description", "who", "when", "type", "link", "count", "total",
        "detail", "sink", "kind", "credits", "debits",
    ]

    enum Part: Sendable, Equatable {
        case text(String)
        case value(String)
    }

    let parts: [Part]
    public let source: String

    /// Parses `source`; `{{` and `}}` stand for literal braces.
    public init(_ source: String) throws(RelayError) {
        self.source = source
        var parts: [Part] = []
        var text = ""
        var i = source.startIndex
        while i < source.endIndex {
            let c = source[i]
            let next = source.index(after: i)
            if c == "{", next < source.endIndex, source[next] == "{" {
                text.append("{")
                i = source.index(after: next)
            } else if c == "}", next < source.endIndex, source[next] == "}" {
                text.append("}")
                i = source.index(after: next)
            } else if c == "{" {
                guard let close = source[next...].firstIndex(of: "}") else {
                    throw RelayError(.template, "an opening { has no closing } (write {{ for a literal brace)")
                }
                let name = String(source[next..<close]).trimmingCharacters(in: .whitespaces)
                guard Self.placeholders.contains(name) else {
                    throw RelayError(
                        .template, "unknown placeholder {\(name)}; known: " + Self.placeholders.sorted().map { "{\($0)}" }.joined(separator: " "))
                }
                if !text.isEmpty { parts.append(.text(text)) }
                text = ""
                parts.append(.value(name))
                i = source.index(after: close)
            } else if c == "}" {
                throw RelayError(.template, "a closing } has no opening { (write }} for a literal brace)")
            } else {
                text.append(c)
                i = next
            }
        }
        if !text.isEmpty { parts.append(.text(text)) }
        self.parts = parts
    }

    /// The text with each placeholder replaced by `values[name]` escaped by `escape`; a missing value is empty.
    public func render(_ values: [String: String], escape: (String) -> String = { $0 }) -> String {
        parts.map { part in
            switch part {
            case .text(let t): return t
            case .value(let name): return escape(values[name] ?? "")
            }
        }.joined()
    }
}

/// The built-in wording, per alert kind: a title (for popups, ntfy, Gotify, Teams) and a text.
public enum DefaultTemplates {
    public static let text: [RelayEvent.Kind: String] = [
        .transactionCreated: "{child}: {amount} for \"{description}\" by {who}. Balance {balance}.",
        .balanceUpdated: "{child}'s balance is now {balance} (was {previous_balance}).",
        .balanceLow: "{child}'s balance is low: {balance}.",
        .balanceRecovered: "{child}'s balance is back to {balance}.",
        .digest: "{detail}: {count} transactions for {child}, {total}, balance {balance}.",
        .outboxRejected: "A {type} of {amount} for {child} (\"{description}\") was refused by the server and undone: {detail}",
        .outboxDead: "A {type} of {amount} for {child} (\"{description}\") could not be sent and was given up: {detail}",
        .connectionLost: "allowance-relay has lost the Allowance Tracker server: {detail}",
        .deliveryDisabled: "Alerts to {sink} are switched off: {detail}",
        .syncConflict: "allowance-relay stopped syncing: {detail}",
        .syncRejected: "allowance-relay set a transaction aside: {detail}",
        .test: "Test alert from allowance-relay: if you can read this, the sink {sink} works.",
        .summary: "{child}, {detail}: {count} transactions, {credits} in, {debits} out. Balance {balance}.",
    ]
    public static let title: [RelayEvent.Kind: String] = [
        .transactionCreated: "{child} {amount}",
        .balanceUpdated: "{child}: {balance}",
        .balanceLow: "Low balance: {child}",
        .balanceRecovered: "Balance OK: {child}",
        .digest: "{child}: {count} transactions",
        .outboxRejected: "Write refused",
        .outboxDead: "Write given up",
        .connectionLost: "Allowance Tracker unreachable",
        .deliveryDisabled: "Alerts switched off",
        .syncConflict: "Allowance data conflict",
        .syncRejected: "Transaction not stored",
        .test: "allowance-relay test",
        .summary: "{child}: {detail}",
    ]
}

/// Money and dates as people read them: the configured currency and locale.
public struct Formatting: Sendable {
    public var currency: String
    public var locale: String
    /// Where a click on an alert leads: a URL template with `{child_id}`, `{child}`, `{transaction_id}` or `{kind}`
    /// in it (optional). Also the `{link}` placeholder.
    public var link: String?
    /// An icon for the push services that show one.
    public var iconURL: String?
    /// The family's time zone: when a day starts for "Mute today" and summaries.
    public var timeZone: TimeZone = .current

    public init(currency: String = "USD", locale: String = "en_US", link: String? = nil) {
        self.currency = currency
        self.locale = locale
        self.link = link
    }

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
            v["credits"] = money(list.filter { $0.type == .credit }.reduce(Decimal(0)) { $0 + $1.amount })
            v["debits"] = money(list.filter { $0.type == .debit }.reduce(Decimal(0)) { $0 + $1.amount })
        }
        if let d = e.detail { v["detail"] = d }
        if let s = e.sink { v["sink"] = s }
        if let link = link(for: e) { v["link"] = link }
        return v
    }

    /// The link for an alert: `template` (a sink's own) or `link`, filled in. A template that names what this alert
    /// lacks (a child for `connection.lost`) leads to the site's front page instead.
    public func link(for e: RelayEvent, template: String? = nil) -> String? {
        guard let template = template ?? link else { return nil }
        let query = CharacterSet.urlPathAllowed.subtracting(CharacterSet(charactersIn: "/?#&="))
        let values: [String: String?] = [
            "{child_id}": e.childId?.lowercased, "{child}": e.childName?.addingPercentEncoding(withAllowedCharacters: query),
            "{transaction_id}": e.transaction?.id.lowercased, "{kind}": e.kind.rawValue,
        ]
        var out = template
        for (name, value) in values where out.contains(name) {
            guard let value else {
                guard let url = URLComponents(string: template), let scheme = url.scheme, let host = url.host else { return nil }
                return "\(scheme)://\(host)\(url.port.map { ":\($0)" } ?? "")/"
            }
            out = out.replacingOccurrences(of: name, with: value)
        }
        return out
    }
}
