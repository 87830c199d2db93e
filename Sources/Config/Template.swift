import Alerts
import Foundation

/// A message template: text with `{placeholder}`s. Parsed when the config is loaded, so an unknown placeholder is
/// a config error, not a surprise at 3 a.m. Values are escaped for the destination; the template's own text is not.
public struct Template: Sendable, Equatable {
    public static let placeholders: Set<String> = [
        "child", "amount", "balance", "previous_balance", "description", "who", "when", "type", "link", "count",
        "total",
        "detail", "sink", "kind", "credits", "debits", "savings_rate", "item", "price", "progress", "item_url",
    ]

    enum Part: Sendable, Equatable {
        case text(String)
        case value(String)
    }

    let parts: [Part]
    public let source: String

    /// Parses `source`; `{{` and `}}` stand for literal braces.
    public init(_ source: String) throws(TemplateError) {
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
                    throw TemplateError("an opening { has no closing } (write {{ for a literal brace)")
                }
                let name = String(source[next..<close]).trimmingCharacters(in: .whitespaces)
                guard Self.placeholders.contains(name) else {
                    throw TemplateError(
                        "unknown placeholder {\(name)}; known: "
                            + Self.placeholders.sorted().map { "{\($0)}" }.joined(separator: " "))
                }
                if !text.isEmpty { parts.append(.text(text)) }
                text = ""
                parts.append(.value(name))
                i = source.index(after: close)
            } else if c == "}" {
                throw TemplateError("a closing } has no opening { (write }} for a literal brace)")
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
        .outboxRejected:
            "A {type} of {amount} for {child} (\"{description}\") was refused by the server and undone: {detail}",
        .outboxDead:
            "A {type} of {amount} for {child} (\"{description}\") could not be sent and was given up: {detail}",
        .connectionLost: "allowance-relay has lost the Allowance Tracker server: {detail}",
        .deliveryDisabled: "Alerts to {sink} are switched off: {detail}",
        .syncConflict: "allowance-relay stopped syncing: {detail}",
        .syncRejected: "allowance-relay set a transaction aside: {detail}",
        .test: "Test alert from allowance-relay: if you can read this, the sink {sink} works.",
        .summary:
            "{child}, {detail}: {count} transactions, {credits} in, {debits} out (savings rate {savings_rate}). Balance {balance}.",
        .goalReached: "{child} can now afford {item} ({price}): balance {balance}.",
        .goalPurchased: "{child} bought {item} ({price}) from the wish list.",
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
        .goalReached: "{child} reached a goal: {item}",
        .goalPurchased: "{child} bought {item}",
    ]
}

/// A template that cannot be read, in words for the configuration error it becomes.
public struct TemplateError: Error, Sendable, Equatable {
    public let message: String

    init(_ message: String) { self.message = message }
}
