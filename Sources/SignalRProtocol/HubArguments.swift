import Foundation

/// The arguments of one invocation from the server, with typed access that says exactly what did not fit.
public struct HubArguments: Sendable {
    public let target: String
    public let values: [JSONValue]

    public init(target: String, values: [JSONValue]) {
        self.target = target
        self.values = values
    }

    public var count: Int { values.count }

    /// Argument `index` as raw JSON.
    public func value(at index: Int) throws(HubProtocolError) -> JSONValue {
        guard index < values.count else {
            throw HubProtocolError(
                "Invocation provides \(values.count) argument(s) but target expects at least \(index + 1).",
                code: .argument(target: target, index: index))
        }
        return values[index]
    }

    /// Decodes argument `index` as `T`. A mismatch names the target, the index, the type and the value's kind.
    public func decode<T: Decodable>(_ index: Int, as type: T.Type = T.self) throws(HubProtocolError) -> T {
        let value = try value(at: index)
        // A decimal is exact from the JSON number's text, and from a string: MessagePack servers write C#'s decimal so.
        if T.self == Decimal.self, let text = value.decimalText,
            let d = Decimal(string: text, locale: Locale(identifier: "en_US_POSIX"))
        {
            return d as! T
        }
        do {
            // Wrapped in an array so that scalars (strings, numbers) decode too.
            let data = Data(JSONValue.array([value]).serialized.utf8)
            let decoded = try JSONDecoder().decode([T].self, from: data)
            return decoded[0]
        } catch {
            throw HubProtocolError(
                "Argument \(index) of '\(target)' is not a \(T.self) (got \(value.kindDescription)): \(Self.reason(error))",
                code: .argument(target: target, index: index))
        }
    }

    private static func reason(_ error: any Error) -> String {
        switch error {
        case DecodingError.typeMismatch(_, let c), DecodingError.valueNotFound(_, let c):
            return c.debugDescription
                + (c.codingPath.count > 1
                    ? " at \(c.codingPath.dropFirst().map(\.stringValue).joined(separator: "."))" : "")
        case DecodingError.keyNotFound(let key, _):
            return "missing key '\(key.stringValue)'"
        case DecodingError.dataCorrupted(let c):
            return c.debugDescription
        default:
            return "\(error)"
        }
    }
}

extension JSONValue {
    /// A number's text, or a string that holds nothing but a plain decimal number.
    var decimalText: String? {
        switch self {
        case .number(let text): text
        case .string(let text)
        where !text.isEmpty && text.utf8.allSatisfy({ (0x30...0x39).contains($0) || $0 == 0x2E || $0 == 0x2D }): text
        default: nil
        }
    }

    var kindDescription: String {
        switch self {
        case .null: return "null"
        case .bool: return "a boolean"
        case .number(let n): return "the number \(n)"
        case .string: return "a string"
        case .array(let a): return "an array of \(a.count)"
        case .object: return "an object"
        }
    }

    /// Any Encodable value as JSON (numbers keep the text the encoder wrote).
    public init(encoding value: some Encodable) throws {
        let data = try JSONEncoder().encode([value])
        guard case .array(let items) = try JSONValue(parsing: data), let first = items.first else {
            throw HubProtocolError("Could not encode \(type(of: value)) as JSON.", code: .unencodable)
        }
        self = first
    }
}
