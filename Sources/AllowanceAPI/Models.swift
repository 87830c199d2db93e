import Foundation
import SignalRProtocol

/// A child as the Allowance Tracker API and hub describe it.
public struct Child: Sendable, Equatable {
    public var id: UUID
    public var firstName: String
    public var lastName: String
    public var weeklyAllowance: Decimal
    public var currentBalance: Decimal

    public init(id: UUID, firstName: String, lastName: String, weeklyAllowance: Decimal, currentBalance: Decimal) {
        self.id = id
        self.firstName = firstName
        self.lastName = lastName
        self.weeklyAllowance = weeklyAllowance
        self.currentBalance = currentBalance
    }
}

public enum TransactionType: String, Sendable, Equatable {
    case credit = "Credit"
    case debit = "Debit"
}

/// A transaction. Money is `Decimal` decoded from the JSON number's text, never through `Double`.
public struct Transaction: Sendable, Equatable {
    public var id: UUID
    public var childId: UUID
    public var amount: Decimal
    public var type: TransactionType
    public var description: String
    public var balanceAfter: Decimal
    public var createdAt: Date
    public var createdByName: String

    public init(
        id: UUID, childId: UUID, amount: Decimal, type: TransactionType, description: String, balanceAfter: Decimal,
        createdAt: Date, createdByName: String
    ) {
        self.id = id
        self.childId = childId
        self.amount = amount
        self.type = type
        self.description = description
        self.balanceAfter = balanceAfter
        self.createdAt = createdAt
        self.createdByName = createdByName
    }
}

/// What went wrong decoding a payload from the server, with the field that was wrong.
public struct PayloadError: Error, Sendable, Equatable, CustomStringConvertible {
    public let message: String
    public init(message: String) { self.message = message }
    public var description: String { message }
}

extension Transaction {
    public init(json: JSONValue) throws(PayloadError) {
        let f = Fields(json, what: "transaction")
        id = try f.uuid("id")
        childId = try f.uuid("childId")
        amount = try f.money("amount")
        let typeText = try f.string("type")
        guard let t = TransactionType(rawValue: typeText) else {
            throw PayloadError(message: "transaction.type must be \"Credit\" or \"Debit\", got \"\(typeText)\".")
        }
        type = t
        description = try f.string("description")
        balanceAfter = try f.money("balanceAfter")
        createdAt = try f.date("createdAt")
        createdByName = (try? f.string("createdByName")) ?? ""
    }
}

extension Child {
    public init(json: JSONValue) throws(PayloadError) {
        let f = Fields(json, what: "child")
        id = try f.uuid("id")
        firstName = try f.string("firstName")
        lastName = (try? f.string("lastName")) ?? ""
        weeklyAllowance = (try? f.money("weeklyAllowance")) ?? 0
        currentBalance = try f.money("currentBalance")
    }
}

/// Exact money and dates from JSON.
public enum Money {
    /// A JSON number (or numeric string) as an exact Decimal: `19.99` stays 19.99.
    public static func decimal(_ value: JSONValue) -> Decimal? {
        let text: String
        switch value {
        case .number(let n): text = n
        case .string(let s): text = s
        default: return nil
        }
        if let fast = FastParse.decimal(text) { return fast }
        guard text.allSatisfy({ "0123456789+-.eE".contains($0) }) else { return nil }
        return Decimal(string: text, locale: Locale(identifier: "en_US_POSIX"))
    }

    /// "+$19.99" / "-$3.00" style text for logs.
    public static func signed(_ amount: Decimal, _ type: TransactionType) -> String {
        (type == .credit ? "+" : "-") + plain(amount)
    }

    /// Money in the JSON the relay emits: an exact decimal string with two places ("26.00"), never a float.
    public static func json(_ amount: Decimal) -> JSONValue { .string(plain(amount)) }

    public static func plain(_ amount: Decimal) -> String {
        var rounded = Decimal()
        var value = amount
        NSDecimalRound(&rounded, &value, 2, .bankers)
        let s = "\(rounded)"
        guard let dot = s.firstIndex(of: ".") else { return s + ".00" }
        let decimals = s.distance(from: dot, to: s.endIndex) - 1
        return decimals == 1 ? s + "0" : s
    }
}

/// ISO-8601 with or without fractional seconds, with `Z` or an offset.
public enum ISODate {
    public static func parse(_ text: String) -> Date? {
        if let d = FastParse.date(text) { return d }
        if let d = try? Date.ISO8601FormatStyle(includingFractionalSeconds: true).parse(text) { return d }
        if let d = try? Date.ISO8601FormatStyle().parse(text) { return d }
        // Servers that omit the zone (ASP.NET with DateTimeKind.Unspecified): read as UTC.
        if !text.hasSuffix("Z"), !text.contains("+"), text.count >= 19 {
            return parse(text + "Z")
        }
        return nil
    }
}

private struct Fields {
    let json: JSONValue
    let what: String

    init(_ json: JSONValue, what: String) {
        self.json = json
        self.what = what
    }

    func field(_ key: String) throws(PayloadError) -> JSONValue {
        guard case .object = json else { throw PayloadError(message: "\(what) must be a JSON object, got \(json.serialized.prefix(40)).") }
        guard let v = json[key], v != .null else { throw PayloadError(message: "\(what).\(key) is missing.") }
        return v
    }

    func string(_ key: String) throws(PayloadError) -> String {
        guard let s = try field(key).stringValue else { throw PayloadError(message: "\(what).\(key) must be a string.") }
        return s
    }

    func uuid(_ key: String) throws(PayloadError) -> UUID {
        let s = try string(key)
        guard let u = FastParse.uuid(s) ?? UUID(uuidString: s) else { throw PayloadError(message: "\(what).\(key) is not a UUID: \"\(s)\".") }
        return u
    }

    func money(_ key: String) throws(PayloadError) -> Decimal {
        let v = try field(key)
        guard let d = Money.decimal(v) else { throw PayloadError(message: "\(what).\(key) must be a number, got \(v.serialized.prefix(40)).") }
        return d
    }

    func date(_ key: String) throws(PayloadError) -> Date {
        let s = try string(key)
        guard let d = ISODate.parse(s) else { throw PayloadError(message: "\(what).\(key) is not an ISO-8601 date: \"\(s)\".") }
        return d
    }
}

/// Which server and account a cache was filled from: the server's URL (without credentials or query), and the
/// user and family the token belongs to when the server says (`GET /api/v1/auth/me`).
public struct ServerIdentity: Sendable, Equatable {
    public var url: String
    public var userId: String?
    public var familyId: String?

    public init(url: URL, userId: String? = nil, familyId: String? = nil) {
        var c = URLComponents(url: url, resolvingAgainstBaseURL: false) ?? URLComponents()
        (c.user, c.password, c.query, c.fragment) = (nil, nil, nil, nil)
        var text = c.string ?? url.absoluteString
        while text.hasSuffix("/") { text.removeLast() }
        self.url = text
        self.userId = userId
        self.familyId = familyId
    }

    /// "user …, family …" when the server named either.
    public var accountIds: String? {
        guard userId != nil || familyId != nil else { return nil }
        return "user \(userId ?? "-"), family \(familyId ?? "-")"
    }

    public var json: JSONValue {
        ["url": .string(url), "userId": userId.map { .string($0) } ?? .null, "familyId": familyId.map { .string($0) } ?? .null]
    }

    public init(json: JSONValue) {
        url = json["url"]?.stringValue ?? ""
        userId = json["userId"]?.stringValue
        familyId = json["familyId"]?.stringValue
    }
}
