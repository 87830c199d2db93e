/// Writes compact JSON straight into bytes, for documents whose shape the code knows (a stored event, an alert):
/// no `JSONValue` tree in between. Strings are escaped as `JSONValue.serialized` escapes them.
public struct JSONWriter {
    public private(set) var bytes: [UInt8] = []
    private var needsComma = false

    public init(capacity: Int = 256) { bytes.reserveCapacity(capacity) }

    public var text: String { String(decoding: bytes, as: UTF8.self) }

    private mutating func separate() {
        if needsComma { bytes.append(UInt8(ascii: ",")) }
        needsComma = true
    }

    public mutating func beginObject() { open(UInt8(ascii: "{")) }
    public mutating func endObject() { close(UInt8(ascii: "}")) }
    public mutating func beginArray() { open(UInt8(ascii: "[")) }
    public mutating func endArray() { close(UInt8(ascii: "]")) }

    private mutating func open(_ bracket: UInt8) {
        separate()
        bytes.append(bracket)
        needsComma = false
    }

    private mutating func close(_ bracket: UInt8) {
        bytes.append(bracket)
        needsComma = true
    }

    /// A member's name; its value follows.
    public mutating func key(_ name: StaticString) {
        separate()
        bytes.append(UInt8(ascii: "\""))
        bytes.append(contentsOf: UnsafeBufferPointer(start: name.utf8Start, count: name.utf8CodeUnitCount))
        bytes.append(UInt8(ascii: "\""))
        bytes.append(UInt8(ascii: ":"))
        needsComma = false
    }

    /// A member's name made at run time (escaped as a string); its value follows.
    public mutating func key(named name: String) {
        string(name)
        bytes.append(UInt8(ascii: ":"))
        needsComma = false
    }

    public mutating func string(_ value: String) {
        separate()
        JSONValue.writeString(value, into: &bytes)
    }

    /// A number (or any JSON literal) as written.
    public mutating func number(_ text: String) {
        separate()
        bytes.append(contentsOf: text.utf8)
    }

    public mutating func bool(_ value: Bool) {
        separate()
        bytes.append(contentsOf: (value ? "true" : "false").utf8)
    }

    public mutating func value(_ value: JSONValue) {
        separate()
        value.write(into: &bytes)
    }

    public mutating func member(_ name: StaticString, _ value: String) {
        key(name)
        string(value)
    }

    /// A string member whose characters `write` appends as they are, unescaped: for texts that never need an escape
    /// (an id's hexadecimal digits, a date's digits), written without a String made for each, then scanned and copied.
    public mutating func member(_ name: StaticString, plain write: (inout [UInt8]) -> Void) {
        key(name)
        string(plain: write)
    }

    /// A string value whose characters `write` appends as they are, unescaped (see `member(_:plain:)`).
    public mutating func string(plain write: (inout [UInt8]) -> Void) {
        separate()
        bytes.append(UInt8(ascii: "\""))
        write(&bytes)
        bytes.append(UInt8(ascii: "\""))
    }
}
