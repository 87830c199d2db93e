import Core
import Foundation
import Synchronization

/// Parsers for the three value kinds every hub event carries (ids, money, dates), for the common exact form,
/// byte by byte. Foundation's general parsers (sscanf for UUIDs, a locale for Decimal, ISO8601FormatStyle) were a
/// quarter of the client's time per event (measured with perf in `make bench`); anything not in the common form
/// falls back to them, so what is accepted does not change. Checked against Foundation in FastParseTests.
enum FastParse {
    /// `xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`, hex in either case.
    static func uuid(_ text: String) -> UUID? {
        var text = text
        return text.withUTF8 { uuid(bytes: $0) }
    }

    static func uuid(bytes b: UnsafeBufferPointer<UInt8>) -> UUID? {
        guard b.count == 36, let p = b.baseAddress, p[8] == 0x2D, p[13] == 0x2D, p[18] == 0x2D, p[23] == 0x2D else {
            return nil
        }
        // The 32 digits into two 64-bit halves through a table; a non-digit marks 0x10, checked once at the end.
        // 29 ns a parse against 37 for a switch and two optionals per digit (a loop of -O builds, 3 million ids).
        return hexDigits.withUnsafeBufferPointer { table -> UUID? in
            var halves: (UInt64, UInt64) = (0, 0)
            var marks: UInt8 = 0
            func digits(_ range: Range<Int>, into half: inout UInt64) {
                for i in range {
                    let n = table[Int(p[i])]
                    marks |= n
                    half = half << 4 | UInt64(n)
                }
            }
            digits(0..<8, into: &halves.0)
            digits(9..<13, into: &halves.0)
            digits(14..<18, into: &halves.0)
            digits(19..<23, into: &halves.1)
            digits(24..<36, into: &halves.1)
            guard marks & 0x10 == 0 else { return nil }
            var value: uuid_t = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
            withUnsafeMutableBytes(of: &value) { out in
                out.storeBytes(of: halves.0.bigEndian, toByteOffset: 0, as: UInt64.self)
                out.storeBytes(of: halves.1.bigEndian, toByteOffset: 8, as: UInt64.self)
            }
            return UUID(uuid: value)
        }
    }

    /// Each byte's value as a hex digit (either case), or 0x10.
    private static let hexDigits: [UInt8] = (0..<256).map { c in
        switch c {
        case 0x30...0x39: UInt8(c - 0x30)
        case 0x61...0x66: UInt8(c - 0x61 + 10)
        case 0x41...0x46: UInt8(c - 0x41 + 10)
        default: 0x10
        }
    }

    /// `uuid` in lower case, as the database and the REST API write ids. Foundation's `uuidString` goes through
    /// sprintf, and ids are written several times per stored event.
    static func lowercased(_ uuid: UUID) -> String {
        String(unsafeUninitializedCapacity: 36) { out in write(uuid, into: out) }
    }

    /// `lowercased`'s 36 characters into `out`, which has room for them; returns 36.
    static func write(_ uuid: UUID, into out: UnsafeMutableBufferPointer<UInt8>) -> Int {
        withUnsafeBytes(of: uuid.uuid) { bytes in
            let digits: StaticString = "0123456789abcdef"
            var o = 0
            for (i, byte) in bytes.enumerated() {
                if i == 4 || i == 6 || i == 8 || i == 10 {
                    out[o] = 0x2D
                    o += 1
                }
                out[o] = digits.utf8Start[Int(byte >> 4)]
                out[o + 1] = digits.utf8Start[Int(byte & 0x0F)]
                o += 2
            }
            return 36
        }
    }

    /// A new random (version 4) UUID. Foundation's `UUID()` opens and reads /dev/urandom for each one, and the system
    /// generator makes a system call per 8 bytes: every event of a blast plans a delivery, each with a new id.
    static func randomUUID() -> UUID {
        var halves = nextRandomHalves()
        return withUnsafeMutableBytes(of: &halves) { b in
            b[6] = b[6] & 0x0F | 0x40  // version 4
            b[8] = b[8] & 0x3F | 0x80  // RFC 4122 variant
            return UUID(uuid: b.load(as: uuid_t.self))
        }
    }

    /// The 128 random bits of a new id, from one generator for the process.
    private static let ids = Mutex(Xoshiro256StarStar())

    private static func nextRandomHalves() -> (UInt64, UInt64) {
        ids.withLock { g in (g.next(), g.next()) }
    }

    /// Where the process's time-ordered ids are: the millisecond of the last one and its count within it.
    private static let lastTimeOrdered = Mutex(TimeOrderedCount())

    /// A version 7 UUID: the time in milliseconds first, then a count (`TimeOrderedCount`), then random bits. Ids made
    /// one after another sort one after another, so a table keyed by them grows at its end instead of at random pages
    /// of its index, and their first 64 bits differ (the SQLite ledger numbers its rows by them).
    static func timeOrderedUUID(at date: Date) -> UUID {
        let halves = nextRandomHalves()
        let asked = UInt64(max(0, date.timeIntervalSince1970 * 1000))
        let (millis, count) = lastTimeOrdered.withLock { $0.next(at: asked, randomStart: halves.0) }
        return timeOrderedUUID(millis: millis, count: count, random: halves)
    }

    /// The version 7 layout: 48 bits of milliseconds (big-endian), the version, the 12-bit count, the variant, and
    /// 62 random bits.
    static func timeOrderedUUID(millis: UInt64, count: UInt64, random: (UInt64, UInt64)) -> UUID {
        var halves = random
        return withUnsafeMutableBytes(of: &halves) { b in
            for i in 0..<6 { b[i] = UInt8(truncatingIfNeeded: millis >> (8 * (5 - i))) }
            b[6] = 0x70 | UInt8(truncatingIfNeeded: count >> 8) & 0x0F
            b[7] = UInt8(truncatingIfNeeded: count)
            b[8] = b[8] & 0x3F | 0x80  // RFC 4122 variant
            return UUID(uuid: b.load(as: uuid_t.self))
        }
    }

    /// `-?digits(.digits)?` with at most 18 digits: exact as significand and exponent.
    static func decimal(_ text: String) -> Decimal? {
        var text = text
        return text.withUTF8(decimal(bytes:))
    }

    static func decimal(bytes b: UnsafeBufferPointer<UInt8>) -> Decimal? {
        var i = 0
        var negative = false
        if i < b.count, b[i] == 0x2D {
            negative = true
            i += 1
        }
        var significand: UInt64 = 0
        var digits = 0
        var fraction = 0
        var seenDot = false
        guard i < b.count else { return nil }
        while i < b.count {
            let c = b[i]
            if c == 0x2E {
                guard !seenDot, digits > 0 else { return nil }
                seenDot = true
            } else if c >= 0x30, c <= 0x39 {
                significand = significand * 10 + UInt64(c - 0x30)
                digits += 1
                if seenDot { fraction += 1 }
                guard digits <= 18 else { return nil }
            } else {
                return nil
            }
            i += 1
        }
        guard digits > 0, !(seenDot && fraction == 0) else { return nil }
        return Decimal(
            sign: negative && significand != 0 ? .minus : .plus, exponent: -fraction,
            significand: Decimal(significand))
    }

    /// `-?digits(.d|.dd)?` as cents (at most 15 integer digits); nil for anything else.
    static func cents(_ text: String) -> Int64? {
        var text = text
        return text.withUTF8(cents(bytes:))
    }

    static func cents(bytes b: UnsafeBufferPointer<UInt8>) -> Int64? {
        var i = 0
        let negative = b.first == 0x2D
        if negative { i = 1 }
        var value: Int64 = 0
        var digits = 0
        while i < b.count, b[i] >= 0x30, b[i] <= 0x39 {
            value = value * 10 + Int64(b[i] - 0x30)
            digits += 1
            i += 1
            guard digits <= 15 else { return nil }
        }
        guard digits > 0 else { return nil }
        var decimals = 0
        if i < b.count, b[i] == 0x2E {
            i += 1
            while i < b.count, b[i] >= 0x30, b[i] <= 0x39, decimals < 2 {
                value = value * 10 + Int64(b[i] - 0x30)
                decimals += 1
                i += 1
            }
            guard decimals > 0 else { return nil }
        }
        guard i == b.count else { return nil }
        for _ in decimals..<2 { value *= 10 }
        return negative ? -value : value
    }

    /// `YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)`; without a zone, nil (the caller decides).
    static func date(_ text: String) -> Date? {
        var text = text
        return text.withUTF8 { date(bytes: $0) }
    }

    static func date(bytes b: UnsafeBufferPointer<UInt8>) -> Date? {
        do {
            func num(_ at: Int, _ n: Int) -> Int? {
                guard at + n <= b.count else { return nil }
                var v = 0
                for k in at..<at + n {
                    guard b[k] >= 0x30, b[k] <= 0x39 else { return nil }
                    v = v * 10 + Int(b[k] - 0x30)
                }
                return v
            }
            guard b.count >= 20, b[4] == 0x2D, b[7] == 0x2D, b[10] == 0x54 || b[10] == 0x74, b[13] == 0x3A,
                b[16] == 0x3A,
                let year = num(0, 4), let month = num(5, 2), let day = num(8, 2), let hour = num(11, 2),
                let minute = num(14, 2),
                let second = num(17, 2), year >= 1, (1...12).contains(month), day >= 1,
                day <= CivilDate.daysIn(month, year), hour < 24, minute < 60,
                second < 60
            else { return nil }
            var i = 19
            var fraction = 0.0
            if b[i] == 0x2E {
                i += 1
                var digits: UInt64 = 0
                var scale = 1.0
                let start = i
                while i < b.count, b[i] >= 0x30, b[i] <= 0x39 {
                    if i - start < 9 {  // to the nanosecond; more is below what a Date holds
                        digits = digits * 10 + UInt64(b[i] - 0x30)
                        scale *= 10
                    }
                    i += 1
                }
                guard i > start else { return nil }
                fraction = Double(digits) / scale  // one rounding, not one per digit
            }
            guard i < b.count else { return nil }
            var offset = 0
            if b[i] == 0x5A || b[i] == 0x7A {
                guard i + 1 == b.count else { return nil }
            } else if b[i] == 0x2B || b[i] == 0x2D {
                guard i + 6 == b.count, b[i + 3] == 0x3A, let oh = num(i + 1, 2), let om = num(i + 4, 2), oh < 24,
                    om < 60
                else { return nil }
                offset = (oh * 3600 + om * 60) * (b[i] == 0x2D ? -1 : 1)
            } else {
                return nil
            }
            let seconds = CivilDate.days(year, month, day) * 86400 + hour * 3600 + minute * 60 + second - offset
            return Date(timeIntervalSince1970: Double(seconds) + fraction)
        }
    }

    /// `YYYY-MM-DDTHH:MM:SS.mmmZ` for years 1970 to 9999 (nil outside): several are written per stored event, and
    /// Foundation's ISO8601FormatStyle went through a calendar for each (about 2 µs).
    static func isoString(_ date: Date) -> String? {
        var fits = true
        let text = String(unsafeUninitializedCapacity: 24) { b in
            fits = writeISO(date, into: b)
            return fits ? 24 : 0
        }
        return fits ? text : nil
    }

    /// `isoString`'s 24 characters into `b`, which has room for them; false (nothing written) outside its years.
    static func writeISO(_ date: Date, into b: UnsafeMutableBufferPointer<UInt8>) -> Bool {
        let t = date.timeIntervalSince1970
        guard t >= 0, t < 253_402_300_800 else { return false }
        let whole = t.rounded(.down)
        // Truncated as Foundation does, but a value within a microsecond below a millisecond counts as that
        // millisecond: a double cannot hold most millisecond times exactly (a server's `…34.179Z` is read as
        // …34.178999…), and plain truncation wrote it back as `…34.178Z`.
        let millis = min(999, Int((t - whole) * 1000 + 0.001))
        let seconds = Int(whole)
        let (year, month, day) = CivilDate.fromDays(seconds / 86400)
        let clock = seconds % 86400
        func put(_ value: Int, _ at: Int, _ width: Int) {
            var v = value
            for k in stride(from: at + width - 1, through: at, by: -1) {
                b[k] = UInt8(0x30 + v % 10)
                v /= 10
            }
        }
        put(year, 0, 4)
        b[4] = 0x2D
        put(month, 5, 2)
        b[7] = 0x2D
        put(day, 8, 2)
        b[10] = 0x54
        put(clock / 3600, 11, 2)
        b[13] = 0x3A
        put(clock / 60 % 60, 14, 2)
        b[16] = 0x3A
        put(clock % 60, 17, 2)
        b[19] = 0x2E
        put(millis, 20, 3)
        b[23] = 0x5A
        return true
    }

    /// The civil date of a day count since 1970-01-01 (Howard Hinnant's civil_from_days), for days >= 0.
}

extension UUID {
    /// Lower case, as stored and as the REST API writes ids (without Foundation's sprintf).
    public var lowercased: String { FastParse.lowercased(self) }

    /// `lowercased`, appended to `bytes` without a String made for it (a stored alert writes several ids).
    public func appendLowercased(to bytes: inout [UInt8]) {
        withLowercasedUTF8 { bytes.append(contentsOf: $0) }
    }

    /// `lowercased`'s 36 bytes, lent to `body` from the stack without a String made for them (a row's ids, bound).
    public func withLowercasedUTF8<T, E: Error>(_ body: (UnsafeBufferPointer<UInt8>) throws(E) -> T) throws(E) -> T {
        try withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 36) { buffer throws(E) in
            let count = FastParse.write(self, into: buffer)
            return try body(UnsafeBufferPointer(rebasing: buffer[..<count]))
        }
    }

    /// `prefix` and `lowercased` in one String, made once (a delivery's id).
    public func lowercased(after prefix: StaticString) -> String {
        String(unsafeUninitializedCapacity: prefix.utf8CodeUnitCount + 36) { out in
            let head = UnsafeBufferPointer(start: prefix.utf8Start, count: prefix.utf8CodeUnitCount)
            _ = out.initialize(from: head)
            return head.count + FastParse.write(self, into: UnsafeMutableBufferPointer(rebasing: out[head.count...]))
        }
    }

    /// A new random UUID without a file open per call (see `FastParse.randomUUID`).
    public static func random() -> UUID { FastParse.randomUUID() }

    /// A new UUID that sorts after those made before it (version 7): for ids that key a growing table.
    public static func timeOrdered(at date: Date = Date()) -> UUID { FastParse.timeOrderedUUID(at: date) }
}
