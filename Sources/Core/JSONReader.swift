/// A pull reader over JSON bytes, for decoding a known shape straight into a type without building a `JSONValue`
/// tree. As strict as the tree parser (the same string, number and nesting rules, no stray or trailing commas),
/// but it never throws: anything it does not expect makes a read return nil (or false) and sets `failed`, and the
/// caller then hands the whole message to the tree path, which accepts or refuses it with the exact error text.
///
/// Valid only inside the closure that lends it the bytes (`JSONReader.read`).
public struct JSONReader {
    private var parser: JSONParser
    private enum Token { case open, value, comma, colon }
    private var last = Token.open
    public private(set) var failed = false

    @usableFromInline
    package init(_ bytes: UnsafeBufferPointer<UInt8>) { parser = JSONParser(bytes) }

    /// Lends a reader over `bytes` to `body`.
    @inlinable
    public static func read<T>(_ bytes: UnsafeBufferPointer<UInt8>, _ body: (inout JSONReader) -> T) -> T {
        var reader = JSONReader(bytes)
        return body(&reader)
    }

    /// Where the reader is, in bytes from the start.
    public var offset: Int { parser.index }

    private mutating func fail() -> Bool {
        failed = true
        return false
    }

    private mutating func consume(_ byte: UInt8) -> Bool {
        parser.skipWhitespace()
        guard !failed, parser.peek() == byte else { return fail() }
        parser.index += 1
        return true
    }

    /// Reads `{`.
    public mutating func enterObject() -> Bool {
        guard consume(UInt8(ascii: "{")), (try? parser.enter()) != nil else { return fail() }
        last = .open
        return true
    }

    /// Reads `[`.
    public mutating func enterArray() -> Bool {
        guard consume(UInt8(ascii: "[")), (try? parser.enter()) != nil else { return fail() }
        last = .open
        return true
    }

    /// The next member's name with its `:` read; nil at the object's end (`}` read) or when `failed`.
    public mutating func nextKey() -> JSONKey? {
        guard !failed else { return nil }
        parser.skipWhitespace()
        if parser.peek() == UInt8(ascii: "}") {
            guard last == .open || last == .value else {
                _ = fail()
                return nil
            }
            parser.index += 1
            parser.depth -= 1
            last = .value
            return nil
        }
        if last == .value {
            guard consume(UInt8(ascii: ",")) else { return nil }
            last = .comma
            parser.skipWhitespace()
        }
        guard last == .open || last == .comma, parser.peek() == UInt8(ascii: "\"") else {
            _ = fail()
            return nil
        }
        // A name is plain ASCII nearly always: its bytes are compared as they are, without making a String.
        let key: JSONKey
        if let plain = parser.plainASCIIString() {
            key = JSONKey(.plain(plain))
        } else if let decoded = try? parser.parseString() {
            key = JSONKey(.decoded(decoded))
        } else {
            _ = fail()
            return nil
        }
        guard consume(UInt8(ascii: ":")) else { return nil }
        last = .colon
        return key
    }

    /// Whether another element follows (then read it); false at the array's end (`]` read) or when `failed`.
    public mutating func nextElement() -> Bool {
        guard !failed else { return false }
        parser.skipWhitespace()
        if parser.peek() == UInt8(ascii: "]") {
            guard last == .open || last == .value else { return fail() }
            parser.index += 1
            parser.depth -= 1
            last = .value
            return false
        }
        if last == .value {
            guard consume(UInt8(ascii: ",")) else { return false }
            last = .comma
        }
        guard last == .open || last == .comma else { return fail() }
        return true
    }

    /// A string value (escapes decoded, UTF-8 validated); nil for anything else.
    public mutating func string() -> String? {
        value { p in p.peek() == UInt8(ascii: "\"") ? try? p.parseString() : nil }
    }

    /// A string of plain ASCII (no escapes), lent as its bytes to `body` without making a String (ids, dates);
    /// nil, and `failed`, for anything else or when `body` gives nil.
    ///
    /// Inlinable, so that it is specialized for each caller's `T` in the caller's module: unspecialized, each
    /// call looked up `T?`'s metadata at run time (about 7% of the client's CPU per event).
    @inlinable
    public mutating func asciiString<T>(_ body: (UnsafeBufferPointer<UInt8>) -> T?) -> T? {
        lend(asciiBytes(), to: body)
    }

    /// The bytes of a plain ASCII string value (valid inside `read`'s closure only); nil, and `failed`, for anything
    /// else.
    @usableFromInline
    mutating func asciiBytes() -> UnsafeBufferPointer<UInt8>? {
        value { p in p.peek() == UInt8(ascii: "\"") ? p.plainASCIIString() : nil }
    }

    /// A number value's bytes as written, lent to `body` without making a String (money, a message's type); nil,
    /// and `failed`, for anything else or when `body` gives nil. Inlinable for the reason `asciiString` is.
    @inlinable
    public mutating func number<T>(_ body: (UnsafeBufferPointer<UInt8>) -> T?) -> T? {
        lend(numberBytes(), to: body)
    }

    /// A value's bytes, as read, lent to `body`; nil when there are none (the read marked the reader failed) or
    /// `body` gives nil (marked here).
    @inlinable
    mutating func lend<T>(_ bytes: UnsafeBufferPointer<UInt8>?, to body: (UnsafeBufferPointer<UInt8>) -> T?) -> T? {
        guard let bytes else { return nil }
        guard let value = body(bytes) else {
            markFailed()
            return nil
        }
        return value
    }

    @usableFromInline
    mutating func markFailed() { failed = true }

    /// The bytes of a number value (valid inside `read`'s closure only); nil, and `failed`, for anything else.
    @usableFromInline
    mutating func numberBytes() -> UnsafeBufferPointer<UInt8>? {
        value { p in
            guard let c = p.peek(), c == UInt8(ascii: "-") || (c >= 0x30 && c <= 0x39) else { return nil }
            return try? p.numberBytes()
        }
    }

    /// Reads one value with `read` (after whitespace); nil from it marks the reader failed.
    private mutating func value<T>(_ read: (inout JSONParser) -> T?) -> T? {
        parser.skipWhitespace()
        guard !failed, let v = read(&parser) else {
            _ = fail()
            return nil
        }
        last = .value
        return v
    }

    /// What the next value is, without reading it.
    public mutating func peek() -> UInt8? {
        parser.skipWhitespace()
        return failed ? nil : parser.peek()
    }

    /// Reads and drops any value (strictly, as the tree parser would).
    public mutating func skipValue() -> Bool {
        guard !failed, (try? parser.parseValue()) != nil else { return fail() }
        last = .value
        return true
    }

    /// Whether only whitespace is left.
    public mutating func atEnd() -> Bool {
        parser.skipWhitespace()
        return !failed && parser.isAtEnd
    }
}

/// A member's name, as `JSONReader.nextKey` read it (valid inside `JSONReader.read`'s closure only). It matches a
/// literal in a `switch` (`case "id":`) or with `~=` without a String made for it: keys were read as Strings and
/// compared as such, about 5% of the client's CPU per event.
public struct JSONKey {
    @usableFromInline
    enum Storage {
        /// Plain ASCII, no escapes: the bytes as written.
        case plain(UnsafeBufferPointer<UInt8>)
        /// Anything else, decoded (escapes, other UTF-8).
        case decoded(String)
    }

    @usableFromInline
    let storage: Storage

    @usableFromInline
    init(_ storage: Storage) { self.storage = storage }

    @inlinable
    public static func ~= (name: StaticString, key: JSONKey) -> Bool {
        switch key.storage {
        case .plain(let bytes): bytes.spells(name)
        case .decoded(let decoded): decoded == name.description
        }
    }
}

extension UnsafeBufferPointer<UInt8> {
    /// Whether these bytes are `literal`'s, compared byte by byte without a String made for either (a member's name,
    /// a value from a known few).
    @inlinable
    public func spells(_ literal: StaticString) -> Bool {
        // withUTF8Buffer: a one-character literal is held as a scalar, without a pointer to its bytes.
        literal.withUTF8Buffer { bytes in
            guard count == bytes.count else { return false }
            for i in 0..<count where self[i] != bytes[i] { return false }
            return true
        }
    }

    /// Whether these bytes spell `lowercased` (UTF-8 in lower case) with ASCII letters in either case: a name that
    /// peers may write as `Amount` or `amount` (a hub's target, a C# property's key).
    @inlinable
    public func spells(lowercased: UnsafeBufferPointer<UInt8>) -> Bool {
        guard count == lowercased.count else { return false }
        for i in 0..<count {
            let b = self[i]
            guard (b >= 0x41 && b <= 0x5A ? b | 0x20 : b) == lowercased[i] else { return false }
        }
        return true
    }

    /// The same for a literal written in lower case.
    @inlinable
    public func spells(lowercased literal: StaticString) -> Bool {
        literal.withUTF8Buffer { spells(lowercased: $0) }
    }
}
