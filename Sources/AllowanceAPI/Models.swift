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

    /// Why the relay cannot keep the server's figures for this child, or nil: money is kept in cents.
    public var problem: String? {
        if Money.minorUnits(currentBalance) == nil {
            return "its currentBalance \(currentBalance) has more than two decimals"
        }
        if Money.minorUnits(weeklyAllowance) == nil {
            return "its weeklyAllowance \(weeklyAllowance) has more than two decimals"
        }
        return nil
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
    public var amount: Decimal { didSet { amountCents = Money.minorUnits(amount) } }
    public var type: TransactionType
    public var description: String
    public var balanceAfter: Decimal { didSet { balanceAfterCents = Money.minorUnits(balanceAfter) } }
    public var createdAt: Date
    public var createdByName: String
    /// The amounts in cents, worked out once (nil: more than two decimals): storing and alerting need them several
    /// times per event, and each conversion from Decimal is a Decimal multiplication.
    public private(set) var amountCents: Int64?
    public private(set) var balanceAfterCents: Int64?

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
        amountCents = Money.minorUnits(amount)
        balanceAfterCents = Money.minorUnits(balanceAfter)
    }

    /// From amounts already known in cents (the hub reader has them exactly).
    init(
        id: UUID, childId: UUID, cents amount: Int64, type: TransactionType, description: String,
        balanceAfterCents: Int64,
        createdAt: Date, createdByName: String
    ) {
        self.id = id
        self.childId = childId
        self.amount = Money.decimal(cents: amount)
        self.type = type
        self.description = description
        self.balanceAfter = Money.decimal(cents: balanceAfterCents)
        self.createdAt = createdAt
        self.createdByName = createdByName
        amountCents = amount
        self.balanceAfterCents = balanceAfterCents
    }
}

extension Transaction {
    /// Why the relay cannot keep this transaction as the server sent it (nil: it can): an amount that is not
    /// above zero or has more than two decimals, a balance with more than two decimals, a date before 2000 or
    /// more than a day ahead. Such a row is quarantined, not stored: one bad row must not stop every sync.
    public func problem(now: Date = Date()) -> String? {
        if amount <= 0 { return "its amount \(amount) is not above 0" }
        if amountCents == nil { return "its amount \(amount) has more than two decimals" }
        if balanceAfterCents == nil { return "its balanceAfter \(balanceAfter) has more than two decimals" }
        if createdAt < Self.earliest { return "its createdAt \(ISODate.string(createdAt)) is before 2000" }
        if createdAt > now.addingTimeInterval(86400) {
            return "its createdAt \(ISODate.string(createdAt)) is in the future"
        }
        return nil
    }

    static let earliest = Date(timeIntervalSince1970: 946_684_800)  // 2000-01-01
}

/// A row from the server the relay did not store, and why: kept aside (quarantined) and reported. Most are
/// transactions; a BalanceUpdated whose balance is not in cents is one too.
public struct RejectedRow: Sendable, Equatable {
    /// The transaction id as the server sent it (or a stand-in when it had none, or for a balance).
    public var id: String
    public var childId: UUID?
    public var reason: String
    /// The row as received, cut to 2 KB.
    public var payload: String
    /// What it was, in words: "transaction <id>" unless said otherwise.
    public var subject: String

    public init(id: String, childId: UUID?, reason: String, payload: String, subject: String? = nil) {
        self.id = id
        self.childId = childId
        self.reason = reason
        self.payload = String(payload.prefix(2048))
        self.subject = subject ?? "transaction \(id)"
    }
}

/// What went wrong decoding a payload from the server, with the field that was wrong.

extension Transaction {
    /// The transaction as JSON, the one shape every writer uses (the webhook's `data`, the ledger's alerts, the
    /// inbox, the log): ids lowercased, money as exact decimal strings, the time in ISO 8601 with milliseconds.
    /// `init(json:)` reads it back, and the REST API's form too.
    public func write(into w: inout JSONWriter) {
        w.beginObject()
        writeMembers(into: &w)
        w.endObject()
    }

    /// The same members, into an object the caller has begun (the inbox's flat record).
    public func writeMembers(into w: inout JSONWriter) {
        w.member("id") { id.appendLowercased(to: &$0) }
        w.member("childId") { childId.appendLowercased(to: &$0) }
        w.member("type", type.rawValue)
        w.key("amount")
        Money.write(amount, cents: amountCents, into: &w)
        w.member("description", description)
        w.key("balanceAfter")
        Money.write(balanceAfter, cents: balanceAfterCents, into: &w)
        w.member("createdAt") { ISODate.append(createdAt, to: &$0) }
        w.member("createdByName", createdByName)
    }
}

extension Transaction {
    public init(json: JSONValue) throws(APIError) {
        let f = Fields(json, what: "transaction")
        let id = try f.uuid("id")
        let childId = try f.uuid("childId")
        let amount = try f.money("amount")
        let typeText = try f.string("type")
        guard let type = TransactionType(rawValue: typeText) else {
            throw APIError(.invalidPayload, "transaction.type must be \"Credit\" or \"Debit\", got \"\(typeText)\".")
        }
        let description = SafeText.stored(try f.string("description"), limit: SafeText.maxDescription)
        let balanceAfter = try f.money("balanceAfter")
        let createdAt = try f.date("createdAt")
        // Through the one initializer that works out the cents.
        self.init(
            id: id, childId: childId, amount: amount, type: type, description: description, balanceAfter: balanceAfter,
            createdAt: createdAt,
            createdByName: SafeText.stored((try? f.string("createdByName")) ?? "", limit: SafeText.maxName))
    }
}

extension Child {
    public init(json: JSONValue) throws(APIError) {
        let f = Fields(json, what: "child")
        id = try f.uuid("id")
        firstName = SafeText.stored(try f.string("firstName"), limit: SafeText.maxName)
        lastName = SafeText.stored((try? f.string("lastName")) ?? "", limit: SafeText.maxName)
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

    /// The amount in cents when it has at most two decimals (nil: more, or out of range).
    public static func minorUnits(_ amount: Decimal) -> Int64? {
        // Most amounts have at most two decimals and a significand far inside Int64: scaled as an integer, in a sixth
        // of the time of Decimal's arithmetic below (this runs several times for each stored event). The significand
        // is a whole number; below 10^14 (< 2^53) a Double holds it exactly, and reading it as one is a fifth of the
        // time of comparing it as a Decimal (which normalises both sides).
        let exponent = amount.exponent
        if !amount.isNaN, (-2...2).contains(exponent) {
            let significand = NSDecimalNumber(decimal: amount.significand).doubleValue
            if significand >= 0, significand < plainSignificandBound {
                var value = Int64(significand)
                for _ in 0..<(exponent + 2) { value *= 10 }
                return amount.sign == .minus ? -value : value
            }
        }
        var scaled = amount * 100
        var rounded = Decimal()
        NSDecimalRound(&rounded, &scaled, 0, .plain)
        guard rounded == scaled, let value = Int64(exactly: NSDecimalNumber(decimal: rounded).int64Value),
            Decimal(value) == rounded
        else {
            return nil
        }
        return value
    }

    /// 10^14: a significand below it, times 10^4 at most (an exponent of 2, in cents), stays below 10^18, inside Int64.
    private static let plainSignificandBound = 1e14

    /// Money in the JSON the relay emits: an exact decimal string with two places ("26.00"), never a float (a
    /// figure with more decimals keeps them all).
    public static func json(_ amount: Decimal) -> JSONValue { .string(plain(amount)) }

    public static func decimal(cents: Int64) -> Decimal {
        Decimal(sign: cents < 0 ? .minus : .plus, exponent: -2, significand: Decimal(cents.magnitude))
    }

    /// Money as the JSON the relay writes (see `json`), straight into a writer.
    public static func write(_ amount: Decimal, cents: Int64? = nil, into w: inout JSONWriter) {
        if let cents {
            w.string(plain: { bytes in withPlainUTF8(cents: cents) { bytes.append(contentsOf: $0) } })
        } else {
            w.string(plain(amount))
        }
    }

    /// "26.00" from cents (written for every amount of every alert and row; up to 15 bytes the string is held
    /// inline, with no allocation).
    public static func plain(cents minor: Int64) -> String {
        withPlainUTF8(cents: minor) { String(decoding: $0, as: UTF8.self) }
    }

    /// `plain(cents:)`'s bytes, lent to `body` from the stack: the digits written once, from the right.
    public static func withPlainUTF8<T>(cents minor: Int64, _ body: (UnsafeBufferPointer<UInt8>) -> T) -> T {
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 24) { buffer in
            var m = minor.magnitude
            var i = buffer.count
            for place in 0..<3 {
                i -= 1
                if place == 2 {
                    buffer[i] = UInt8(ascii: ".")
                } else {
                    buffer[i] = UInt8(ascii: "0") + UInt8(m % 10)
                    m /= 10
                }
            }
            repeat {
                i -= 1
                buffer[i] = UInt8(ascii: "0") + UInt8(m % 10)
                m /= 10
            } while m > 0
            if minor < 0 {
                i -= 1
                buffer[i] = UInt8(ascii: "-")
            }
            return body(UnsafeBufferPointer(rebasing: buffer[i...]))
        }
    }

    public static func plain(_ amount: Decimal) -> String {
        // Cents as an integer (every amount the relay keeps): a quarter of the time of Decimal's description,
        // and this runs several times per stored event (inbox row, alert JSON).
        if let minor = minorUnits(amount) { return plain(cents: minor) }
        // More decimals than cents (a figure from the server that is set aside, or in a log line): written as it
        // came, not rounded, so that what is kept and said is what was sent.
        let s = "\(amount)"
        guard let dot = s.firstIndex(of: ".") else { return s + ".00" }
        let decimals = s.distance(from: dot, to: s.endIndex) - 1
        return decimals == 1 ? s + "0" : s
    }
}

/// ISO-8601 with or without fractional seconds, with `Z` or an offset.
public enum ISODate {
    public static func parse(_ text: String) -> Date? {
        if let d = FastParse.date(text) { return d }
        // Foundation's parser rolls an impossible day over (Feb 30 becomes Mar 2) and takes year 0000: refuse.
        guard calendarDateIsValid(text) else { return nil }
        if let d = try? Date.ISO8601FormatStyle(includingFractionalSeconds: true).parse(text) { return d }
        if let d = try? Date.ISO8601FormatStyle().parse(text) { return d }
        // Servers that omit the zone (ASP.NET with DateTimeKind.Unspecified): read as UTC.
        if !text.hasSuffix("Z"), !text.contains("+"), text.count >= 19 {
            return parse(text + "Z")
        }
        return nil
    }

    /// `2026-11-23T08:00:00.123Z`: UTC, milliseconds (truncated, as Foundation's formatter does).
    public static func string(_ date: Date) -> String {
        FastParse.isoString(date) ?? Date.ISO8601FormatStyle(includingFractionalSeconds: true).format(date)
    }

    /// `string(date)`, appended to `bytes` without a String made for it (a stored alert writes several dates).
    public static func append(_ date: Date, to bytes: inout [UInt8]) {
        withUTF8(date) { bytes.append(contentsOf: $0) }
    }

    /// `string(date)`'s bytes, lent to `body` from the stack without a String made for them (a row's times, bound).
    public static func withUTF8<T, E: Error>(
        _ date: Date, _ body: (UnsafeBufferPointer<UInt8>) throws(E) -> T
    ) throws(E) -> T {
        try withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 24) { buffer throws(E) in
            if FastParse.writeISO(date, into: buffer) { return try body(UnsafeBufferPointer(buffer)) }
            // Outside the years the fast writer covers: Foundation's text, rare enough to copy.
            return try Array(string(date).utf8).withUnsafeBufferPointer { bytes throws(E) in try body(bytes) }
        }
    }

    /// A leading YYYY-MM-DD names a real day of a year from 1 on.
    static func calendarDateIsValid(_ text: String) -> Bool {
        let head = Array(text.utf8.prefix(10))
        // not this form: the parsers decide
        guard head.count == 10, head[4] == 0x2D, head[7] == 0x2D else { return true }
        func num(_ range: Range<Int>) -> Int? {
            var v = 0
            for i in range {
                guard (0x30...0x39).contains(head[i]) else { return nil }
                v = v * 10 + Int(head[i] - 0x30)
            }
            return v
        }
        guard let y = num(0..<4), let m = num(5..<7), let d = num(8..<10), y >= 1, (1...12).contains(m), d >= 1 else {
            return false
        }
        return d <= CivilDate.daysIn(m, y)
    }
}

struct Fields {
    let json: JSONValue
    let what: String

    init(_ json: JSONValue, what: String) {
        self.json = json
        self.what = what
    }

    func field(_ key: String) throws(APIError) -> JSONValue {
        guard case .object = json else {
            throw APIError(.invalidPayload, "\(what) must be a JSON object, got \(json.serialized.prefix(40)).")
        }
        // Exactly as named, else ignoring case, as .NET's readers do: a server's MessagePack writes the C# property
        // names (`ChildId`), its JSON camelCase (`childId`).
        guard let v = json[key] ?? json[ignoringCase: key], v != .null else {
            throw APIError(.invalidPayload, "\(what).\(key) is missing.")
        }
        return v
    }

    func string(_ key: String) throws(APIError) -> String {
        guard let s = try field(key).stringValue else {
            throw APIError(.invalidPayload, "\(what).\(key) must be a string.")
        }
        return s
    }

    func uuid(_ key: String) throws(APIError) -> UUID {
        let s = try string(key)
        guard let u = FastParse.uuid(s) ?? UUID(uuidString: s) else {
            throw APIError(.invalidPayload, "\(what).\(key) is not a UUID: \"\(s)\".")
        }
        return u
    }

    func money(_ key: String) throws(APIError) -> Decimal {
        let v = try field(key)
        guard let d = Money.decimal(v) else {
            throw APIError(.invalidPayload, "\(what).\(key) must be a number, got \(v.serialized.prefix(40)).")
        }
        return d
    }

    func date(_ key: String) throws(APIError) -> Date {
        let s = try string(key)
        guard let d = ISODate.parse(s) else {
            throw APIError(.invalidPayload, "\(what).\(key) is not an ISO-8601 date: \"\(s)\".")
        }
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
        [
            "url": .string(url), "userId": userId.map { .string($0) } ?? .null,
            "familyId": familyId.map { .string($0) } ?? .null,
        ]
    }

    public init(json: JSONValue) {
        url = json["url"]?.stringValue ?? ""
        userId = json["userId"]?.stringValue
        familyId = json["familyId"]?.stringValue
    }
}
