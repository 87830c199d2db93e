/// A JSON syntax error. `message` is the text the official .NET reader gives ("Error reading JSON."),
/// `detail` says where and what, for logs.
public struct JSONSyntaxError: Error, Sendable, CustomStringConvertible {
    public let detail: String
    public let offset: Int
    public var message: String { "Error reading JSON." }
    public var description: String { "Error reading JSON: \(detail) at byte \(offset)." }
}

/// A strict RFC 8259 reader over UTF-8 bytes: no comments, no trailing commas, no unquoted names,
/// bounded nesting (64, as System.Text.Json), strings validated as UTF-8, numbers kept as text.
package struct JSONParser {
    package static let maxDepth = 64

    private let bytes: UnsafeBufferPointer<UInt8>
    package var index = 0
    package var depth = 0

    package init(_ bytes: UnsafeBufferPointer<UInt8>) { self.bytes = bytes }

    /// Parses one whole document (whitespace around it allowed, nothing else).
    package static func parse(_ bytes: some Collection<UInt8>) throws(JSONSyntaxError) -> JSONValue {
        let array = Array(bytes)
        let result: Result<JSONValue, JSONSyntaxError> = array.withUnsafeBufferPointer { buffer in
            var parser = JSONParser(buffer)
            return Result { () throws(JSONSyntaxError) -> JSONValue in
                let value = try parser.parseValue()
                try parser.expectEnd()
                return value
            }
        }
        return try result.get()
    }

    package var isAtEnd: Bool { index >= bytes.count }

    package mutating func skipWhitespace() {
        while index < bytes.count {
            switch bytes[index] {
            case 0x20, 0x09, 0x0A, 0x0D: index += 1
            default: return
            }
        }
    }

    package func peek() -> UInt8? { index < bytes.count ? bytes[index] : nil }

    package func syntaxError(_ detail: String) -> JSONSyntaxError { JSONSyntaxError(detail: detail, offset: index) }

    package mutating func expectEnd() throws(JSONSyntaxError) {
        skipWhitespace()
        if !isAtEnd { throw syntaxError("unexpected data after the JSON value") }
    }

    package mutating func expect(_ byte: UInt8) throws(JSONSyntaxError) {
        skipWhitespace()
        guard peek() == byte else { throw syntaxError("expected '\(Character(Unicode.Scalar(byte)))'") }
        index += 1
    }

    package mutating func parseValue() throws(JSONSyntaxError) -> JSONValue {
        skipWhitespace()
        guard let c = peek() else { throw syntaxError("unexpected end of data") }
        switch c {
        case UInt8(ascii: "{"):
            var members: [(key: String, value: JSONValue)] = []
            do {
                try parseObject { (key, value) throws(Never) in members.append((key, value)) }
            } catch {
                switch error {
                case .syntax(let e): throw e
                case .member(let never): switch never {}
                }
            }
            return .object(members)
        case UInt8(ascii: "["):
            return .array(try parseArray())
        case UInt8(ascii: "\""):
            return .string(try parseString())
        case UInt8(ascii: "t"):
            try literal("true")
            return .bool(true)
        case UInt8(ascii: "f"):
            try literal("false")
            return .bool(false)
        case UInt8(ascii: "n"):
            try literal("null")
            return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            return .number(try parseNumber())
        default:
            throw syntaxError("unexpected character '\(Character(Unicode.Scalar(c)))'")
        }
    }

    /// Reads an object, handing each member to `body` as soon as it is read, so a caller can reject a
    /// bad member before the rest of the object is looked at (as the .NET reader does).
    package mutating func parseObject<E: Error>(
        _ body: (String, JSONValue) throws(E) -> Void
    ) throws(JSONObjectReadError<E>) {
        do { try enter() } catch { throw .syntax(error) }
        defer { depth -= 1 }
        do { try expect(UInt8(ascii: "{")) } catch { throw .syntax(error) }
        skipWhitespace()
        if peek() == UInt8(ascii: "}") {
            index += 1
            return
        }
        while true {
            skipWhitespace()
            let key: String
            let value: JSONValue
            do throws(JSONSyntaxError) {
                guard peek() == UInt8(ascii: "\"") else {
                    throw syntaxError("expected a property name in double quotes")
                }
                key = try parseString()
                try expect(UInt8(ascii: ":"))
                value = try parseValue()
            } catch { throw .syntax(error) }
            do { try body(key, value) } catch { throw .member(error) }
            skipWhitespace()
            switch peek() {
            case UInt8(ascii: ","): index += 1
            case UInt8(ascii: "}"):
                index += 1
                return
            default: throw .syntax(syntaxError("expected ',' or '}' in object"))
            }
        }
    }

    private mutating func parseArray() throws(JSONSyntaxError) -> [JSONValue] {
        try enter()
        defer { depth -= 1 }
        index += 1
        var items: [JSONValue] = []
        skipWhitespace()
        if peek() == UInt8(ascii: "]") {
            index += 1
            return items
        }
        while true {
            items.append(try parseValue())
            skipWhitespace()
            switch peek() {
            case UInt8(ascii: ","): index += 1
            case UInt8(ascii: "]"):
                index += 1
                return items
            default: throw syntaxError("expected ',' or ']' in array")
            }
        }
    }

    package mutating func enter() throws(JSONSyntaxError) {
        depth += 1
        if depth > JSONParser.maxDepth { throw syntaxError("nesting deeper than \(JSONParser.maxDepth) levels") }
    }

    private mutating func literal(_ word: StaticString) throws(JSONSyntaxError) {
        let count = word.utf8CodeUnitCount
        guard index + count <= bytes.count else { throw syntaxError("unexpected end of data") }
        for i in 0..<count where bytes[index + i] != word.utf8Start[i] {
            throw syntaxError("invalid literal")
        }
        index += count
    }

    package mutating func parseNumber() throws(JSONSyntaxError) -> String {
        String(decoding: try numberBytes(), as: UTF8.self)
    }

    /// A number's bytes as written (strictly, as `parseNumber`), without a String made for them.
    package mutating func numberBytes() throws(JSONSyntaxError) -> UnsafeBufferPointer<UInt8> {
        let start = index
        if peek() == UInt8(ascii: "-") { index += 1 }
        guard let first = peek(), first >= 0x30, first <= 0x39 else { throw syntaxError("invalid number") }
        if first == 0x30 {
            index += 1
        } else {
            skipDigits()
        }
        if peek() == UInt8(ascii: ".") {
            index += 1
            guard let d = peek(), d >= 0x30, d <= 0x39 else { throw syntaxError("invalid number") }
            skipDigits()
        }
        if peek() == UInt8(ascii: "e") || peek() == UInt8(ascii: "E") {
            index += 1
            if peek() == UInt8(ascii: "+") || peek() == UInt8(ascii: "-") { index += 1 }
            guard let d = peek(), d >= 0x30, d <= 0x39 else { throw syntaxError("invalid number") }
            skipDigits()
        }
        return UnsafeBufferPointer(rebasing: bytes[start..<index])
    }

    private mutating func skipDigits() {
        while let d = peek(), d >= 0x30, d <= 0x39 { index += 1 }
    }

    /// At an opening quote: the bytes up to the closing one when they are printable ASCII without escapes (the
    /// reader then stands after the string); nil otherwise, the reader unmoved.
    package mutating func plainASCIIString() -> UnsafeBufferPointer<UInt8>? {
        var i = index + 1
        while i < bytes.count {
            let c = bytes[i]
            if c == UInt8(ascii: "\"") {
                defer { index = i + 1 }
                return UnsafeBufferPointer(rebasing: bytes[(index + 1)..<i])
            }
            if c < 0x20 || c >= 0x80 || c == UInt8(ascii: "\\") { return nil }
            i += 1
        }
        return nil
    }

    package mutating func parseString() throws(JSONSyntaxError) -> String {
        index += 1  // opening quote
        let start = index
        // Fast path: no escapes.
        while index < bytes.count {
            let c = bytes[index]
            if c == UInt8(ascii: "\"") {
                let raw = UnsafeBufferPointer(rebasing: bytes[start..<index])
                index += 1
                // ASCII needs no validation (String(validating:) is generic over the encoding: a metadata look-up per call).
                if !raw.contains(where: { $0 >= 0x80 }) { return String(decoding: raw, as: UTF8.self) }
                guard let s = String(validating: raw, as: UTF8.self) else {
                    throw syntaxError("invalid UTF-8 in string")
                }
                return s
            }
            if c == UInt8(ascii: "\\") { break }
            if c < 0x20 { throw syntaxError("control character in string") }
            index += 1
        }
        var out = Array(UnsafeBufferPointer(rebasing: bytes[start..<index]))
        while index < bytes.count {
            let c = bytes[index]
            switch c {
            case UInt8(ascii: "\""):
                index += 1
                guard let s = String(validating: out, as: UTF8.self) else {
                    throw syntaxError("invalid UTF-8 in string")
                }
                return s
            case UInt8(ascii: "\\"):
                index += 1
                guard let e = peek() else { throw syntaxError("unexpected end of data") }
                index += 1
                switch e {
                case UInt8(ascii: "\""): out.append(0x22)
                case UInt8(ascii: "\\"): out.append(0x5C)
                case UInt8(ascii: "/"): out.append(0x2F)
                case UInt8(ascii: "b"): out.append(0x08)
                case UInt8(ascii: "f"): out.append(0x0C)
                case UInt8(ascii: "n"): out.append(0x0A)
                case UInt8(ascii: "r"): out.append(0x0D)
                case UInt8(ascii: "t"): out.append(0x09)
                case UInt8(ascii: "u"):
                    var scalar = try hex4()
                    if (0xD800..<0xDC00).contains(scalar) {
                        guard peek() == UInt8(ascii: "\\"), index + 1 < bytes.count,
                            bytes[index + 1] == UInt8(ascii: "u")
                        else { throw syntaxError("unpaired surrogate") }
                        index += 2
                        let low = try hex4()
                        guard (0xDC00..<0xE000).contains(low) else { throw syntaxError("unpaired surrogate") }
                        scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                    } else if (0xDC00..<0xE000).contains(scalar) {
                        throw syntaxError("unpaired surrogate")
                    }
                    guard let u = Unicode.Scalar(scalar) else { throw syntaxError("invalid escape") }
                    out.append(contentsOf: String(Character(u)).utf8)
                default: throw syntaxError("invalid escape")
                }
            default:
                if c < 0x20 { throw syntaxError("control character in string") }
                out.append(c)
                index += 1
            }
        }
        throw syntaxError("unterminated string")
    }

    private mutating func hex4() throws(JSONSyntaxError) -> UInt32 {
        guard index + 4 <= bytes.count else { throw syntaxError("unexpected end of data") }
        var v: UInt32 = 0
        for _ in 0..<4 {
            let c = bytes[index]
            let d: UInt32
            switch c {
            case 0x30...0x39: d = UInt32(c - 0x30)
            case 0x41...0x46: d = UInt32(c - 0x41 + 10)
            case 0x61...0x66: d = UInt32(c - 0x61 + 10)
            default: throw syntaxError("invalid \\u escape")
            }
            v = v << 4 | d
            index += 1
        }
        return v
    }
}

/// What can go wrong while reading an object member by member: the JSON itself, or the caller's check of a member.
package enum JSONObjectReadError<E: Error>: Error {
    case syntax(JSONSyntaxError)
    case member(E)
}

extension JSONValue {
    /// Parses one JSON document with the strict reader.
    public init(parsing bytes: some Collection<UInt8>) throws(JSONSyntaxError) {
        self = try JSONParser.parse(bytes)
    }
}
