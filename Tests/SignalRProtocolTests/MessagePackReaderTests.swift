import Foundation
import SignalRProtocol
import Testing

/// The MessagePack reader and writer on the spec's forms (msgpack.org's spec.md): every size of every kind, and what a
/// hostile peer sends (cut-short values, counts the bytes cannot hold, deep nesting).
@Suite struct MessagePackReaderTests {
    func value(_ bytes: [UInt8]) -> JSONValue? {
        bytes.withUnsafeBytes { raw in
            var r = MessagePackReader(raw)
            guard let v = r.readValue(), r.isAtEnd else { return nil }
            return v
        }
    }

    @Test func integersOfEverySize() {
        let cases: [([UInt8], String)] = [
            ([0x00], "0"), ([0x7F], "127"), ([0xFF], "-1"), ([0xE0], "-32"), ([0xCC, 0xFF], "255"),
            ([0xCD, 0x01, 0x00], "256"),
            ([0xCE, 0x00, 0x01, 0x00, 0x00], "65536"),
            ([0xCF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF], "18446744073709551615"),
            ([0xD0, 0x80], "-128"), ([0xD1, 0x80, 0x00], "-32768"), ([0xD2, 0x80, 0x00, 0x00, 0x00], "-2147483648"),
            ([0xD3, 0x80, 0, 0, 0, 0, 0, 0, 0], "-9223372036854775808"),
        ]
        for (bytes, text) in cases { #expect(value(bytes) == .number(text), "\(bytes)") }
    }

    @Test func writerPicksTheShortestIntegerForm() {
        let cases: [(Int64, [UInt8])] = [
            (0, [0x00]), (127, [0x7F]), (128, [0xCC, 0x80]), (256, [0xCD, 0x01, 0x00]),
            (65536, [0xCE, 0x00, 0x01, 0x00, 0x00]),
            (-1, [0xFF]), (-32, [0xE0]), (-33, [0xD0, 0xDF]), (-129, [0xD1, 0xFF, 0x7F]),
            (Int64(Int32.min), [0xD2, 0x80, 0, 0, 0]),
        ]
        for (n, bytes) in cases {
            var w = MessagePackWriter()
            w.write(n)
            #expect(w.bytes == bytes, "\(n)")
            #expect(value(bytes) == .number(String(n)))
        }
    }

    @Test func stringsBinaryArraysAndMapsOfEverySize() {
        let long = String(repeating: "a", count: 300)
        var w = MessagePackWriter()
        w.write(long)
        #expect(Array(w.bytes.prefix(3)) == [0xDA, 0x01, 0x2C])
        #expect(value(w.bytes) == .string(long))
        #expect(value([0xD9, 0x02, 0x68, 0x69]) == .string("hi"))
        #expect(value([0xDB, 0, 0, 0, 0x02, 0x68, 0x69]) == .string("hi"))
        #expect(value([0xC4, 0x03, 1, 2, 3]) == .string("AQID"))  // bytes as base64, as System.Text.Json writes them
        #expect(value([0xDC, 0x00, 0x02, 0x01, 0xC0]) == .array([.number("1"), .null]))
        #expect(value([0xDE, 0x00, 0x01, 0xA1, 0x6B, 0xC3]) == .object([("k", .bool(true))]))
        #expect(value([0x81, 0x01, 0xA1, 0x76]) == .object([("1", .string("v"))]))  // a key that is not a string
        #expect(value([0xCB] + withUnsafeBytes(of: (2.5).bitPattern.bigEndian, Array.init)) == .number("2.5"))
    }

    @Test func timestampsOfAllThreeSizes() {
        // 2026-11-24T18:30:00Z = 1795545000
        let seconds: UInt32 = 1_795_545_000
        let t32: [UInt8] = [0xD6, 0xFF] + withUnsafeBytes(of: seconds.bigEndian, Array.init)
        #expect(value(t32) == .string("2026-11-24T18:30:00Z"))
        let both = UInt64(123_456_700) << 34 | UInt64(seconds)
        let t64: [UInt8] = [0xD7, 0xFF] + withUnsafeBytes(of: both.bigEndian, Array.init)
        #expect(value(t64) == .string("2026-11-24T18:30:00.1234567Z"))
        let t96: [UInt8] =
            [0xC7, 12, 0xFF] + withUnsafeBytes(of: UInt32(5_000_000).bigEndian, Array.init)
            + withUnsafeBytes(of: Int64(-1).bigEndian, Array.init)
        #expect(value(t96) == .string("1969-12-31T23:59:59.005Z"))
        #expect(value([0xD6, 0x05, 0, 0, 0, 0]) == nil, "an extension this client does not know")
    }

    @Test func cutShortValuesAreRefusedWithoutMoving() {
        for bytes: [UInt8] in [
            [0xCD, 0x01], [0xA5, 0x61], [0xC4, 0x05, 1], [0x92, 0x01], [0xDC, 0x00], [0xD7, 0xFF, 0, 0],
        ] {
            bytes.withUnsafeBytes { raw in
                var r = MessagePackReader(raw)
                #expect(r.readValue() == nil, "\(bytes)")
                #expect(r.position == 0)
                let skipped = r.skip()
                #expect(!skipped)
                #expect(r.position == 0)
            }
        }
    }

    /// A count the bytes cannot hold is refused before anything is reserved for it.
    @Test func liesAboutCountsAreRefused() {
        ([0xDD, 0xFF, 0xFF, 0xFF, 0xFF, 0x01] as [UInt8]).withUnsafeBytes { raw in
            var r = MessagePackReader(raw)
            #expect(r.readArrayHeader() == nil)
        }
        ([0xDF, 0x7F, 0xFF, 0xFF, 0xFF, 0x01, 0x02] as [UInt8]).withUnsafeBytes { raw in
            var r = MessagePackReader(raw)
            #expect(r.readMapHeader() == nil)
        }
    }

    @Test func deepNestingIsRefusedNotACrash() {
        let deep = [UInt8](repeating: 0x91, count: 100_000) + [0xC0]
        #expect(value(deep) == nil)
        deep.withUnsafeBytes { raw in
            var r = MessagePackReader(raw)
            let skipped = r.skip()  // skipping needs no recursion
            #expect(skipped)
            #expect(r.isAtEnd)
        }
    }

    /// Found by the fuzzer (Fuzz/harnesses/messagepack.swift): maps keyed by maps keyed by maps... Each key's text
    /// holds the escaped text of the one below, doubling at each level; such keys are refused instead.
    @Test func mapsKeyedByMapsAreRefusedQuickly() {
        let nested = [UInt8](repeating: 0x81, count: 60) + [UInt8](repeating: 0xC0, count: 61)
        #expect(value(nested) == nil)
        #expect(value([0x81, 0x91, 0x01, 0x02]) == nil, "an array as a key")
        #expect(value([0x81, 0xC3, 0x02]) == .object([("true", .number("2"))]))
    }

    /// Found by the fuzzer: a float32 written as Float's shortest text, read back as a double, is another number
    /// (about -5.08969e+07 instead of -50896896); its exact value is written instead.
    @Test func aFloat32KeepsItsExactValue() {
        #expect(value([0xCA, 0xCC, 0x42, 0x28, 0x00]) == .number("-50896896.0"))
    }

    @Test func invalidUTF8IsNotAString() {
        ([0xA2, 0xC3, 0x28] as [UInt8]).withUnsafeBytes { raw in
            var r = MessagePackReader(raw)
            #expect(r.readString() == nil)
            #expect(r.position == 0)
        }
    }

    @Test func jsonValuesRoundTrip() {
        let v: JSONValue = .object([
            ("a", .array([.number("1"), .number("-70000"), .number("2.25"), .bool(false), .null])),
            ("s", .string("héllo")),
        ])
        var w = MessagePackWriter()
        w.write(v)
        #expect(value(w.bytes) == v)
    }
}
