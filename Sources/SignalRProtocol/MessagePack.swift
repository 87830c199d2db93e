import Foundation

/// MessagePack (msgpack.org's spec), the part the hub protocol needs: the writer of what a client sends.
public struct MessagePackWriter: Sendable {
    public private(set) var bytes: [UInt8] = []

    public init() {}

    public mutating func writeNil() { bytes.append(0xC0) }

    public mutating func write(_ value: Bool) { bytes.append(value ? 0xC3 : 0xC2) }

    /// The shortest form, as MessagePack-CSharp and Python's msgpack write it (unsigned forms for positive values).
    public mutating func write(_ value: Int64) {
        if value >= 0 { return write(unsigned: UInt64(value)) }
        switch value {
        case -32..<0: bytes.append(UInt8(bitPattern: Int8(value)))
        case Int64(Int8.min)...:
            bytes.append(0xD0)
            append(UInt8(bitPattern: Int8(value)))
        case Int64(Int16.min)...:
            bytes.append(0xD1)
            append(UInt16(bitPattern: Int16(value)))
        case Int64(Int32.min)...:
            bytes.append(0xD2)
            append(UInt32(bitPattern: Int32(value)))
        default:
            bytes.append(0xD3)
            append(UInt64(bitPattern: value))
        }
    }

    public mutating func write(unsigned value: UInt64) {
        switch value {
        case 0..<0x80: bytes.append(UInt8(value))
        case ..<0x100:
            bytes.append(0xCC)
            bytes.append(UInt8(value))
        case ..<0x1_0000:
            bytes.append(0xCD)
            append(UInt16(value))
        case ..<0x1_0000_0000:
            bytes.append(0xCE)
            append(UInt32(value))
        default:
            bytes.append(0xCF)
            append(value)
        }
    }

    public mutating func write(_ value: Double) {
        bytes.append(0xCB)
        append(value.bitPattern)
    }

    public mutating func write(_ value: String) {
        var value = value
        value.withUTF8 { utf8 in
            writeHeader(utf8.count, fix: 0xA0, fixLimit: 32, codes: (0xD9, 0xDA, 0xDB))
            bytes.append(contentsOf: utf8)
        }
    }

    public mutating func write(binary: [UInt8]) {
        writeHeader(binary.count, fix: nil, fixLimit: 0, codes: (0xC4, 0xC5, 0xC6))
        bytes.append(contentsOf: binary)
    }

    public mutating func writeArrayHeader(_ count: Int) {
        writeHeader(count, fix: 0x90, fixLimit: 16, codes: (nil, 0xDC, 0xDD))
    }

    public mutating func writeMapHeader(_ count: Int) {
        writeHeader(count, fix: 0x80, fixLimit: 16, codes: (nil, 0xDE, 0xDF))
    }

    /// A JSON value as MessagePack: integers as integers, other numbers as float64, objects as maps keyed by
    /// their member names.
    public mutating func write(_ value: JSONValue) {
        switch value {
        case .null: writeNil()
        case .bool(let b): write(b)
        case .number(let text):
            if let i = Int64(text) {
                write(i)
            } else if let u = UInt64(text) {
                write(unsigned: u)
            } else {
                write(Double(text) ?? .nan)
            }
        case .string(let s): write(s)
        case .array(let items):
            writeArrayHeader(items.count)
            for item in items { write(item) }
        case .object(let members):
            writeMapHeader(members.count)
            for (key, member) in members {
                write(key)
                write(member)
            }
        }
    }

    private mutating func writeHeader(_ count: Int, fix: UInt8?, fixLimit: Int, codes: (UInt8?, UInt8, UInt8)) {
        if let fix, count < fixLimit {
            bytes.append(fix | UInt8(count))
        } else if let one = codes.0, count < 0x100 {
            bytes.append(one)
            bytes.append(UInt8(count))
        } else if count < 0x1_0000 {
            bytes.append(codes.1)
            append(UInt16(count))
        } else {
            bytes.append(codes.2)
            append(UInt32(count))
        }
    }

    private mutating func append<T: FixedWidthInteger>(_ value: T) {
        withUnsafeBytes(of: value.bigEndian) { bytes.append(contentsOf: $0) }
    }
}

/// A cursor over MessagePack bytes. Every read either takes a whole value of the kind asked for and moves past it,
/// or returns nil and leaves the cursor where it was: the caller names what it was reading in its error.
public struct MessagePackReader {
    private let bytes: UnsafeRawBufferPointer
    public private(set) var position = 0
    /// Nesting deeper than this is refused (a hostile peer must not exhaust the stack).
    public static let maxDepth = 64

    public init(_ bytes: UnsafeRawBufferPointer) { self.bytes = bytes }

    public var isAtEnd: Bool { position >= bytes.count }
    public var remaining: Int { bytes.count - position }

    /// The format byte of the next value.
    public var peek: UInt8? { position < bytes.count ? bytes[position] : nil }

    public mutating func readNil() -> Bool {
        guard peek == 0xC0 else { return false }
        position += 1
        return true
    }

    public mutating func readBool() -> Bool? {
        switch peek {
        case 0xC2:
            position += 1
            return false
        case 0xC3:
            position += 1
            return true
        default: return nil
        }
    }

    /// Any integer form whose value fits in an Int64.
    public mutating func readInt() -> Int64? {
        guard let b = peek else { return nil }
        switch b {
        case 0x00...0x7F:
            position += 1
            return Int64(b)
        case 0xE0...0xFF:
            position += 1
            return Int64(Int8(bitPattern: b))
        case 0xCC: return take(UInt8.self).map(Int64.init)
        case 0xCD: return take(UInt16.self).map(Int64.init)
        case 0xCE: return take(UInt32.self).map(Int64.init)
        case 0xCF:
            guard let v = big(UInt64.self, at: 1), v <= UInt64(Int64.max) else { return nil }
            return take(UInt64.self).map(Int64.init)
        case 0xD0: return take(UInt8.self).map { Int64(Int8(bitPattern: $0)) }
        case 0xD1: return take(UInt16.self).map { Int64(Int16(bitPattern: $0)) }
        case 0xD2: return take(UInt32.self).map { Int64(Int32(bitPattern: $0)) }
        case 0xD3: return take(UInt64.self).map { Int64(bitPattern: $0) }
        default: return nil
        }
    }

    /// A uint64 above Int64.max (the one integer `readInt` leaves).
    public mutating func readLargeUnsigned() -> UInt64? {
        guard peek == 0xCF else { return nil }
        return take(UInt64.self)
    }

    /// A float of either size, or an integer.
    public mutating func readDouble() -> Double? {
        switch peek {
        case 0xCA: return take(UInt32.self).map { Double(Float(bitPattern: $0)) }
        case 0xCB: return take(UInt64.self).map { Double(bitPattern: $0) }
        default: return readInt().map(Double.init)
        }
    }

    /// A string; nil also for bytes that are not UTF-8.
    public mutating func readString() -> String? {
        let begin = position
        guard let utf8 = readStringBytes() else { return nil }
        guard let text = String(validating: utf8, as: UTF8.self) else {
            position = begin
            return nil
        }
        return text
    }

    /// The bytes of a string (UTF-8, unchecked), for a caller that compares or parses them itself.
    public mutating func readStringBytes() -> UnsafeBufferPointer<UInt8>? {
        guard let (start, count) = readLength(fix: 0xA0...0xBF, codes: (0xD9, 0xDA, 0xDB)) else { return nil }
        return UnsafeRawBufferPointer(rebasing: bytes[start..<start + count]).assumingMemoryBound(to: UInt8.self)
    }

    public mutating func readBinary() -> [UInt8]? {
        guard let (start, count) = readLength(fix: nil, codes: (0xC4, 0xC5, 0xC6)) else { return nil }
        return Array(bytes[start..<start + count])
    }

    /// An array's element count; the elements follow. A count the remaining bytes cannot hold is refused.
    public mutating func readArrayHeader() -> Int? { readCount(fix: 0x90...0x9F, codes: (0xDC, 0xDD), bytesPerItem: 1) }

    /// A map's pair count; key, value, key, value... follow.
    public mutating func readMapHeader() -> Int? { readCount(fix: 0x80...0x8F, codes: (0xDE, 0xDF), bytesPerItem: 2) }

    /// The timestamp extension (type -1) in any of its three sizes, as .NET's `DateTime` is written.
    public mutating func readTimestamp() -> Date? {
        readTimestampParts().map { Date(timeIntervalSince1970: Double($0.seconds) + Double($0.nanoseconds) / 1e9) }
    }

    /// The same as whole seconds since 1970 and nanoseconds, exactly as written.
    public mutating func readTimestampParts() -> (seconds: Int64, nanoseconds: UInt32)? {
        let start = position
        guard let (type, body) = readExtension(), type == -1 else {
            position = start
            return nil
        }
        let seconds: Int64
        let nanoseconds: UInt32
        switch body.count {
        case 4:
            seconds = Int64(body.loadBigEndian(UInt32.self, at: 0))
            nanoseconds = 0
        case 8:
            let both = body.loadBigEndian(UInt64.self, at: 0)
            nanoseconds = UInt32(both >> 34)
            seconds = Int64(both & 0x3_FFFF_FFFF)
        case 12:
            nanoseconds = body.loadBigEndian(UInt32.self, at: 0)
            seconds = Int64(bitPattern: body.loadBigEndian(UInt64.self, at: 4))
        default:
            position = start
            return nil
        }
        guard nanoseconds < 1_000_000_000 else {
            position = start
            return nil
        }
        return (seconds, nanoseconds)
    }

    /// An extension value: its type and its bytes.
    public mutating func readExtension() -> (type: Int8, body: UnsafeRawBufferPointer)? {
        guard let b = peek else { return nil }
        let start = position
        let count: Int?
        let header: Int
        switch b {
        case 0xD4: (count, header) = (1, 1)
        case 0xD5: (count, header) = (2, 1)
        case 0xD6: (count, header) = (4, 1)
        case 0xD7: (count, header) = (8, 1)
        case 0xD8: (count, header) = (16, 1)
        case 0xC7: (count, header) = (big(UInt8.self, at: 1).map(Int.init), 2)
        case 0xC8: (count, header) = (big(UInt16.self, at: 1).map(Int.init), 3)
        case 0xC9: (count, header) = (big(UInt32.self, at: 1).map(Int.init), 5)
        default: return nil
        }
        position = start
        guard let count, start + header + 1 + count <= bytes.count else { return nil }
        let type = Int8(bitPattern: bytes[start + header])
        position = start + header + 1 + count
        return (type, UnsafeRawBufferPointer(rebasing: bytes[start + header + 1..<position]))
    }

    /// Moves past one whole value of any kind (without recursion). False (cursor unchanged) when it is cut short.
    public mutating func skip() -> Bool {
        let start = position
        var pending = 1
        while pending > 0 {
            pending -= 1
            if let n = readArrayHeader() {
                pending += n
            } else if let n = readMapHeader() {
                pending += 2 * n
            } else if readNil() || readBool() != nil || readInt() != nil || readLargeUnsigned() != nil
                || readDouble() != nil || readStringBytes() != nil
                || readLength(fix: nil, codes: (0xC4, 0xC5, 0xC6)) != nil || readExtension() != nil
            {
                continue
            } else {
                position = start
                return false
            }
        }
        return true
    }

    /// One whole value as the JSON the hub protocol's arguments are elsewhere: integers and floats as numbers,
    /// binary as base64 text (as System.Text.Json writes bytes), a timestamp as ISO-8601 UTC text, map keys that
    /// are numbers, booleans or nil as their JSON text. nil when the value is cut short, nested too deep, of an
    /// unknown kind, or a map keyed by a map or an array.
    public mutating func readValue(depth: Int = 0) -> JSONValue? {
        let start = position
        guard depth < Self.maxDepth, let b = peek else { return nil }
        if readNil() { return .null }
        if let v = readBool() { return .bool(v) }
        if let v = readInt() { return .number(String(v)) }
        if let v = readLargeUnsigned() { return .number(String(v)) }
        if b == 0xCA || b == 0xCB, let v = readDouble() {
            guard v.isFinite else { return .string(v.isNaN ? "NaN" : v > 0 ? "Infinity" : "-Infinity") }
            // The float32's exact value (as a double's shortest text): Float's own shortest text names another double.
            return .number("\(v)")
        }
        if let v = readString() { return .string(v) }
        if let v = readBinary() { return .string(Data(v).base64EncodedString()) }
        if let (seconds, nanoseconds) = readTimestampParts() {
            return .string(Self.iso(seconds: seconds, nanoseconds: nanoseconds))
        }
        if let n = readArrayHeader() {
            var items: [JSONValue] = []
            items.reserveCapacity(min(n, 1024))
            for _ in 0..<n {
                guard let item = readValue(depth: depth + 1) else {
                    position = start
                    return nil
                }
                items.append(item)
            }
            return .array(items)
        }
        if let n = readMapHeader() {
            var members: [(key: String, value: JSONValue)] = []
            members.reserveCapacity(min(n, 1024))
            for _ in 0..<n {
                guard let key = readValue(depth: depth + 1), let value = readValue(depth: depth + 1) else {
                    position = start
                    return nil
                }
                // A key that is not a string is named by its JSON text if it is a scalar; a map or an array as a key
                // (no .NET type reads one) is refused: its text would double at each level of nesting.
                let name: String
                switch key {
                case .string(let s): name = s
                case .number, .bool, .null: name = key.serialized
                case .array, .object:
                    position = start
                    return nil
                }
                members.append((name, value))
            }
            return .object(members)
        }
        position = start
        return nil
    }

    /// `2026-11-24T18:30:00.1234567Z`: UTC, with the fraction a timestamp carries (none when whole seconds).
    /// (.NET's DateTime counts in ticks of 100 ns: seven digits at most; finer nanoseconds are cut.)
    public static func iso(seconds: Int64, nanoseconds: UInt32) -> String {
        let ticks = Int64(nanoseconds / 100)
        let days = seconds >= 0 ? seconds / 86_400 : (seconds - 86_399) / 86_400
        let secondOfDay = seconds - days * 86_400
        let (y, m, d) = CivilDate.fromDays(Int(days))
        let (year, month, day) = (Int64(y), Int64(m), Int64(d))
        func two(_ n: Int64) -> String { n < 10 ? "0\(n)" : "\(n)" }
        var text = String(repeating: "0", count: max(0, 4 - String(year).count)) + "\(year)-\(two(month))-\(two(day))"
        text += "T\(two(secondOfDay / 3600)):\(two(secondOfDay / 60 % 60)):\(two(secondOfDay % 60))"
        if ticks > 0 {
            var fraction = String(ticks)
            fraction = String(repeating: "0", count: 7 - fraction.count) + fraction
            while fraction.hasSuffix("0") { fraction.removeLast() }
            text += "." + fraction
        }
        return text + "Z"
    }

    // MARK: - Lengths

    /// The format byte and the big-endian integer after it; moves past both.
    private mutating func take<T: FixedWidthInteger>(_: T.Type) -> T? {
        guard let v = big(T.self, at: 1) else { return nil }
        position += 1 + MemoryLayout<T>.size
        return v
    }

    private func big<T: FixedWidthInteger>(_: T.Type, at offset: Int) -> T? {
        guard position + offset + MemoryLayout<T>.size <= bytes.count else { return nil }
        return UnsafeRawBufferPointer(rebasing: bytes[(position + offset)...]).loadBigEndian(T.self, at: 0)
    }

    /// A string or binary header and the bounds of its bytes, which must all be there; moves past them.
    private mutating func readLength(
        fix: ClosedRange<UInt8>?, codes: (UInt8, UInt8, UInt8)
    ) -> (start: Int, count: Int)? {
        guard let b = peek else { return nil }
        let count: Int?
        let header: Int
        if let fix, fix.contains(b) {
            (count, header) = (Int(b - fix.lowerBound), 1)
        } else if b == codes.0 {
            (count, header) = (big(UInt8.self, at: 1).map(Int.init), 2)
        } else if b == codes.1 {
            (count, header) = (big(UInt16.self, at: 1).map(Int.init), 3)
        } else if b == codes.2 {
            (count, header) = (big(UInt32.self, at: 1).map(Int.init), 5)
        } else {
            return nil
        }
        guard let count, position + header + count <= bytes.count else { return nil }
        let start = position + header
        position = start + count
        return (start, count)
    }

    private mutating func readCount(fix: ClosedRange<UInt8>, codes: (UInt8, UInt8), bytesPerItem: Int) -> Int? {
        guard let b = peek else { return nil }
        let count: Int?
        let header: Int
        if fix.contains(b) {
            (count, header) = (Int(b - fix.lowerBound), 1)
        } else if b == codes.0 {
            (count, header) = (big(UInt16.self, at: 1).map(Int.init), 3)
        } else if b == codes.1 {
            (count, header) = (big(UInt32.self, at: 1).map(Int.init), 5)
        } else {
            return nil
        }
        // Each element takes at least one byte: a count beyond what is left is a lie, refused before anything is
        // reserved for it.
        guard let count, count * bytesPerItem <= bytes.count - position - header else { return nil }
        position += header
        return count
    }
}

extension UnsafeRawBufferPointer {
    fileprivate func loadBigEndian<T: FixedWidthInteger>(_: T.Type, at offset: Int) -> T {
        T(bigEndian: loadUnaligned(fromByteOffset: offset, as: T.self))
    }
}
