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
        for bad in ["", "not-a-uuid", "11111111-1111-4111-8111-11111111111", "11111111-1111-4111-8111-11111111111g",
                    "111111111111-4111-8111-1111111111111", "{11111111-1111-4111-8111-111111111111}"] {
            #expect(FastParse.uuid(bad) == nil, "\(bad)")
        }
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
            let d = Date(timeIntervalSince1970: Double(Int.random(in: 0...4_102_444_800)) + Double(Int.random(in: 0...999)) / 1000)
            for text in [withFraction.format(d), plain.format(d)] {
                let fast = FastParse.date(text)
                let foundation = (try? withFraction.parse(text)) ?? (try? plain.parse(text))
                #expect(fast != nil && abs(fast!.timeIntervalSince(foundation!)) < 0.0005, "\(text)")
            }
        }
        #expect(FastParse.date("2026-03-01T10:00:00+02:00") == ISODate.parse("2026-03-01T08:00:00Z"))
        #expect(FastParse.date("2024-02-29T00:00:00.1234567Z")?.timeIntervalSince1970 == 1_709_164_800.1234567)
        for bad in ["2026-02-30T00:00:00Z", "2026-13-01T00:00:00Z", "2026-01-01T24:00:00Z", "2026-01-01T00:00:00", "2026-01-01",
                    "2026-01-01T00:00:00.Z", "2026-01-01T00:00:00+0200"] {
            #expect(FastParse.date(bad) == nil, "\(bad)")
        }
        #expect(ISODate.parse("2026-01-01T00:00:00") == ISODate.parse("2026-01-01T00:00:00Z"), "no zone: read as UTC, as before")
    }
}
