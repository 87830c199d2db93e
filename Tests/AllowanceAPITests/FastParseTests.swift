import Foundation
import Testing

@testable import AllowanceAPI

/// The fast parsers must agree with Foundation's on what they accept, and leave everything else to them.
@Suite struct FastParseTests {
    @Test func uuidsAgreeWithFoundation() {
        for _ in 0..<2000 {
            let u = UUID()
            #expect(FastParse.uuid(u.uuidString) == u)
            #expect(FastParse.uuid(u.uuidString.lowercased()) == u)
        }
        for bad in [
            "", "not-a-uuid", "11111111-1111-4111-8111-11111111111", "11111111-1111-4111-8111-11111111111g",
            "111111111111-4111-8111-1111111111111", "{11111111-1111-4111-8111-111111111111}",
        ] {
            #expect(FastParse.uuid(bad) == nil, "\(bad)")
        }
        // Every digit's place, with each kind of byte that is not a hex digit (or is one just outside a range).
        let good = Array("6F9619FF-8b86-D011-b42d-00C04FC964FF".utf8)
        for at in good.indices where good[at] != UInt8(ascii: "-") {
            for byte in Array("/:@G`g -\u{7f}".utf8) + [0x00, 0xC3] {
                var text = good
                text[at] = byte
                let string = String(decoding: text, as: UTF8.self)
                #expect(FastParse.uuid(string) == nil, "\(string)")  // (Foundation takes some of them: it decides)
            }
        }
        #expect(
            FastParse.uuid(String(decoding: good, as: UTF8.self))
                == UUID(uuidString: "6f9619ff-8b86-d011-b42d-00c04fc964ff"))
    }

    @Test func decimalsAgreeWithFoundation() {
        var texts = ["0", "0.1", "19.99", "-5.25", "12345678.91", "100", "0.00", "-0", "007.50", "999999999999999999"]
        for _ in 0..<2000 {
            let cents = Int.random(in: -10_000_000...10_000_000)
            texts.append(String(format: "%.2f", Double(cents) / 100))
            texts.append(String(cents))
        }
        for t in texts {
            #expect(FastParse.decimal(t) == Decimal(string: t, locale: Locale(identifier: "en_US_POSIX")), "\(t)")
        }
        // Not the plain form: left to Foundation.
        for other in ["1e-2", "+5", "1.", ".5", "1.2.3", "", "-", "1234567890123456789", "12a"] {
            #expect(FastParse.decimal(other) == nil, "\(other)")
        }
    }

    @Test func datesAgreeWithFoundation() {
        let withFraction = Date.ISO8601FormatStyle(includingFractionalSeconds: true)
        let plain = Date.ISO8601FormatStyle()
        for _ in 0..<2000 {
            let d = Date(
                timeIntervalSince1970: Double(Int.random(in: 0...4_102_444_800)) + Double(Int.random(in: 0...999))
                    / 1000)
            for text in [withFraction.format(d), plain.format(d)] {
                let fast = FastParse.date(text)
                let foundation = (try? withFraction.parse(text)) ?? (try? plain.parse(text))
                #expect(fast != nil && abs(fast!.timeIntervalSince(foundation!)) < 0.0005, "\(text)")
            }
        }
        #expect(FastParse.date("2026-03-01T10:00:00+02:00") == ISODate.parse("2026-03-01T08:00:00Z"))
        #expect(FastParse.date("2024-02-29T00:00:00.1234567Z")?.timeIntervalSince1970 == 1_709_164_800.1234567)
        for bad in [
            "2026-02-30T00:00:00Z", "2026-13-01T00:00:00Z", "2026-01-01T24:00:00Z", "2026-01-01T00:00:00", "2026-01-01",
            "2026-01-01T00:00:00.Z", "2026-01-01T00:00:00+0200",
        ] {
            #expect(FastParse.date(bad) == nil, "\(bad)")
        }
        #expect(
            ISODate.parse("2026-01-01T00:00:00") == ISODate.parse("2026-01-01T00:00:00Z"),
            "no zone: read as UTC, as before")
    }

    /// The stored form of every date: what Foundation's formatter writes, and a millisecond string read back comes
    /// out unchanged (the cache compares them).
    @Test func isoStringsAgreeWithFoundation() {
        let foundation = Date.ISO8601FormatStyle(includingFractionalSeconds: true)
        var seed: UInt64 = 0x9E37_79B9_7F4A_7C15
        func next() -> UInt64 {
            seed = seed &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return seed >> 11
        }
        var samples: [TimeInterval] = [
            0, 0.001, 0.999, 1.0005, 59.9999, 86_399.999, 951_782_400, 1_709_164_800.1234567, 253_402_300_799.999,
        ]
        for _ in 0..<20_000 {
            samples.append(Double(next() % 253_402_300_800_000) / 1000 + Double(next() % 1000) / 1e7)
        }
        for t in samples {
            let d = Date(timeIntervalSince1970: t)
            let ours = FastParse.isoString(d)!
            let theirs = foundation.format(d)
            // Foundation truncates (after arithmetic relative to 2001, which loses a little): where we differ, ours is
            // the millisecond a microsecond above, the one the time stands for (see isoString).
            let (a, b) = (ISODate.parse(ours)!.timeIntervalSince1970, ISODate.parse(theirs)!.timeIntervalSince1970)
            #expect(
                ours == theirs || (abs(a - b - 0.001) < 0.0001 && abs(a - t) < 0.000_002),
                "\(t): \(ours) against \(theirs)")
        }
        for _ in 0..<5000 {
            let text = foundation.format(Date(timeIntervalSince1970: Double(next() % 4_102_444_800_000) / 1000))
            #expect(ISODate.string(ISODate.parse(text)!) == text)
        }
        #expect(FastParse.isoString(Date(timeIntervalSince1970: -1)) == nil, "before 1970: Foundation's formatter")
        #expect(ISODate.string(Date(timeIntervalSince1970: -1.5)) == "1969-12-31T23:59:58.500Z")
    }

    @Test func uuidsAreWrittenInLowerCaseAsFoundationDoes() {
        for _ in 0..<2000 {
            let u = UUID()
            #expect(u.lowercased == u.uuidString.lowercased())
            #expect(u.lowercased(after: "dlv_") == "dlv_" + u.uuidString.lowercased())
            #expect(u.withLowercasedUTF8 { String(decoding: $0, as: UTF8.self) } == u.uuidString.lowercased())
        }
        #expect(UUID().lowercased(after: "").count == 36)
    }

    /// What a stored alert's JSON appends in place is the text itself, after what was there; a date outside the
    /// fast years goes through Foundation's formatter, as its text does.
    @Test func idsAndDatesAppendedToBytesAreTheirTexts() {
        for _ in 0..<2000 {
            let u = UUID()
            var bytes: [UInt8] = Array("x".utf8)
            u.appendLowercased(to: &bytes)
            #expect(String(decoding: bytes, as: UTF8.self) == "x" + u.uuidString.lowercased())
        }
        for t in [-1.5, 0, 0.001, 1_709_164_800.1234567, 253_402_300_799.999, 253_402_300_800] {
            let d = Date(timeIntervalSince1970: t)
            var bytes: [UInt8] = Array("x".utf8)
            ISODate.append(d, to: &bytes)
            #expect(String(decoding: bytes, as: UTF8.self) == "x" + ISODate.string(d), "\(t)")
        }
        #expect(ISODate.string(Date(timeIntervalSince1970: -1.5)) == "1969-12-31T23:59:58.500Z")
    }

    @Test func randomUUIDsAreVersion4AndDistinct() {
        let ids = (0..<10_000).map { _ in UUID.random() }
        #expect(Set(ids).count == ids.count)
        for id in ids.prefix(500) {
            let text = id.lowercased
            #expect(text[text.index(text.startIndex, offsetBy: 14)] == "4", "\(text)")
            #expect("89ab".contains(text[text.index(text.startIndex, offsetBy: 19)]), "\(text)")
            #expect(UUID(uuidString: text) == id)
        }
    }

    @Test func timeOrderedUUIDsSortByTimeAndAreVersion7() {
        let t = Date(timeIntervalSince1970: 1_763_866_291.5)
        let ids = (0..<1000).map { UUID.timeOrdered(at: t.addingTimeInterval(Double($0) / 100)) }.map(\.lowercased)
        #expect(ids == ids.sorted(), "a later millisecond sorts later")
        #expect(Set(ids).count == ids.count)
        #expect(ids[0].hasPrefix("019aae9f-ad2c-7"), "\(ids[0]): the millisecond time, big-endian")
        #expect(ids.allSatisfy { $0[$0.index($0.startIndex, offsetBy: 14)] == "7" })
    }

    /// A burst in one millisecond (a batch planned at one `now`): each id sorts after the one before, and their first
    /// 64 bits (time, version, count) differ; past 4,096 ids the time moves on by a millisecond. On a count of its own,
    /// so that ids other tests make meanwhile do not move it.
    @Test func idsMadeInOneMillisecondCountUpInOrder() {
        let t: UInt64 = 1_763_866_292_250  // 0x019aae9fb01a
        var counter = TimeOrderedCount()
        var random = SystemRandomNumberGenerator()
        let ids = (0..<6000).map { _ in
            let (millis, count) = counter.next(at: t, randomStart: random.next())
            return FastParse.timeOrderedUUID(millis: millis, count: count, random: (random.next(), random.next()))
                .lowercased
        }
        #expect(ids == ids.sorted(), "made in order, sorted in order")
        #expect(Set(ids.map { $0.prefix(18) }).count == ids.count, "the first 64 bits differ")
        #expect(ids[0].hasPrefix("019aae9f-b01a-7"), "\(ids[0])")
        #expect(Int(ids[0].dropFirst(15).prefix(3), radix: 16)! < 2048, "a random start, with room to count")
        #expect(ids.last!.hasPrefix("019aae9f-b01b-7"), "\(ids.last!): the count ran out, the next millisecond")
        #expect(ids.allSatisfy { UUID(uuidString: $0)?.lowercased == $0 && "89ab".contains($0.dropFirst(19).first!) })

        // A clock a little behind the last id keeps counting on; one far behind starts again from its own time.
        let last = counter.next(at: t + 1, randomStart: 0)
        #expect(counter.next(at: t - 200, randomStart: 0) == (last.millis, last.count + 1))
        #expect(counter.next(at: t - 86_400_000, randomStart: 3 << 53) == (t - 86_400_000, 3))
    }
}
