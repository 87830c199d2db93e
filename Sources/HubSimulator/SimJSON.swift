import Foundation

/// A JSON value as the simulator reads and writes it, apart from the client's codec: read by Foundation's
/// JSONDecoder, written by the few lines below (RFC 8259), so that a bug in the client's JSON shows as a failing test
/// instead of being mirrored by a server that shares it. Numbers are `Decimal` (money stays exact). Objects keep the
/// order they are written in: ASP.NET Core writes a hub message's `type`, `target`, `arguments` in that order and a
/// record's properties in their declared order, and a client's fast path may count on it.
indirect enum SimValue: Decodable, Sendable, Equatable, ExpressibleByStringLiteral, ExpressibleByIntegerLiteral,
    ExpressibleByBooleanLiteral, ExpressibleByArrayLiteral, ExpressibleByDictionaryLiteral
{
    case null
    case bool(Bool)
    case number(Decimal)
    case string(String)
    case array([SimValue])
    case object([(String, SimValue)])

    init(stringLiteral value: String) { self = .string(value) }
    init(integerLiteral value: Int) { self = .number(Decimal(value)) }
    init(booleanLiteral value: Bool) { self = .bool(value) }
    init(arrayLiteral elements: SimValue...) { self = .array(elements) }
    init(dictionaryLiteral elements: (String, SimValue)...) { self = .object(elements) }

    init(from decoder: any Decoder) throws {
        let c = try decoder.singleValueContainer()
        if c.decodeNil() {
            self = .null
        } else if let b = try? c.decode(Bool.self) {
            self = .bool(b)
        } else if let n = try? c.decode(Decimal.self) {
            self = .number(n)
        } else if let s = try? c.decode(String.self) {
            self = .string(s)
        } else if let a = try? c.decode([SimValue].self) {
            self = .array(a)
        } else {
            // A read object's order is not known (nor needed): by key.
            self = .object(try c.decode([String: SimValue].self).sorted { $0.key < $1.key })
        }
    }

    static func == (a: SimValue, b: SimValue) -> Bool {
        switch (a, b) {
        case (.null, .null): true
        case (.bool(let x), .bool(let y)): x == y
        case (.number(let x), .number(let y)): x == y
        case (.string(let x), .string(let y)): x == y
        case (.array(let x), .array(let y)): x == y
        case (.object(let x), .object(let y)):
            x.count == y.count && zip(x, y).allSatisfy { $0.0 == $1.0 && $0.1 == $1.1 }
        default: false
        }
    }

    subscript(key: String) -> SimValue? {
        if case .object(let o) = self { o.first { $0.0 == key }?.1 } else { nil }
    }

    var stringValue: String? { if case .string(let s) = self { s } else { nil } }
    var decimalValue: Decimal? { if case .number(let n) = self { n } else { nil } }
    /// A whole number that fits an Int, else nil.
    var intValue: Int? {
        guard case .number(let n) = self else { return nil }
        let i = NSDecimalNumber(decimal: n).intValue
        return Decimal(i) == n ? i : nil
    }
    var isNull: Bool { self == .null }

    /// The JSON text, members in their order.
    func write(into out: inout [UInt8]) {
        switch self {
        case .null: out += Array("null".utf8)
        case .bool(let b): out += Array((b ? "true" : "false").utf8)
        case .number(let n): out += Array(n.description.utf8)
        case .string(let s): Self.write(string: s, into: &out)
        case .array(let items):
            out.append(UInt8(ascii: "["))
            for (i, item) in items.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                item.write(into: &out)
            }
            out.append(UInt8(ascii: "]"))
        case .object(let members):
            out.append(UInt8(ascii: "{"))
            for (i, (key, value)) in members.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                Self.write(string: key, into: &out)
                out.append(UInt8(ascii: ":"))
                value.write(into: &out)
            }
            out.append(UInt8(ascii: "}"))
        }
    }

    /// RFC 8259 section 7: the quote, the backslash and the control characters escaped; the rest as UTF-8.
    private static func write(string s: String, into out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        for byte in s.utf8 {
            switch byte {
            case UInt8(ascii: "\""): out += Array(#"\""#.utf8)
            case UInt8(ascii: "\\"): out += Array(#"\\"#.utf8)
            case 0x0A: out += Array(#"\n"#.utf8)
            case 0x0D: out += Array(#"\r"#.utf8)
            case 0x09: out += Array(#"\t"#.utf8)
            case 0..<0x20: out += Array(String(format: "\\u%04x", byte).utf8)
            default: out.append(byte)
            }
        }
        out.append(UInt8(ascii: "\""))
    }

    var bytes: [UInt8] {
        var out: [UInt8] = []
        write(into: &out)
        return out
    }
}

enum SimJSON {
    struct Malformed: Error, CustomStringConvertible {
        let description: String
    }

    /// A JSON text's value; a text that is not JSON throws.
    static func parse(_ bytes: some Collection<UInt8>) throws(Malformed) -> SimValue {
        do {
            return try JSONDecoder().decode(SimValue.self, from: Data(bytes))
        } catch {
            throw Malformed(description: "not JSON: \(error)")
        }
    }

    /// A time as ASP.NET Core writes a UTC `DateTime`: ISO 8601 with milliseconds and `Z`.
    static func time(_ date: Date) -> SimValue {
        .string(Date.ISO8601FormatStyle(includingFractionalSeconds: true).format(date))
    }

    /// A child as `GET /api/v1/children` lists it, properties in the API's order.
    static func value(_ c: SimChild) -> SimValue {
        [
            "id": .string(c.id.uuidString), "firstName": .string(c.firstName), "lastName": .string(c.lastName),
            "weeklyAllowance": .number(c.weeklyAllowance), "currentBalance": .number(c.currentBalance),
            "lastAllowanceDate": c.lastAllowanceDate.map(time) ?? .null,
        ]
    }

    /// A transaction as the API and the hub's TransactionCreated carry it (with the simulator's `sequence` cursor).
    static func value(_ t: SimTransaction) -> SimValue {
        [
            "id": .string(t.id.uuidString), "childId": .string(t.childId.uuidString), "amount": .number(t.amount),
            "type": .string(t.type), "description": .string(t.description), "balanceAfter": .number(t.balanceAfter),
            "createdAt": time(t.createdAt), "createdByName": .string(t.createdByName),
            "sequence": .number(Decimal(t.sequence)),
        ]
    }
}
