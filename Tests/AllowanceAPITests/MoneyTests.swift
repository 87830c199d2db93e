import Foundation
import Testing

@testable import AllowanceAPI

/// Money in cents: exact both ways, whichever way a Decimal holds the amount (its exponent, trailing zeros), and nil
/// for what has more than two decimals or does not fit.
@Suite struct MoneyTests {
    @Test(
        arguments: [
            ("25.16", 2516), ("-3", -300), ("0", 0), ("1.5", 150), ("0.01", 1), ("100", 10000), ("1e2", 10000),
            ("1e3", 100_000), ("1.230", 123), ("-12345678.91", -1_234_567_891),
            ("999999999999999", 99_999_999_999_999_900), ("99999999999999e2", 999_999_999_999_990_000),
            ("92233720368547758.07", Int64.max),
        ] as [(String, Int64)])
    func centsAreExact(_ text: String, _ cents: Int64) throws {
        let amount = try #require(Decimal(string: text, locale: Locale(identifier: "en_US_POSIX")))
        #expect(Money.minorUnits(amount) == cents, "\(text)")
    }

    // 999999999999999e2 is 9.99e18 cents: past Int64.max, however its significand and exponent are held.
    @Test(arguments: ["0.001", "1.005", "-0.125", "92233720368547758.08", "999999999999999e2", "1e30"])
    func moreThanTwoDecimalsOrTooLargeIsNil(_ text: String) throws {
        let amount = try #require(Decimal(string: text, locale: Locale(identifier: "en_US_POSIX")))
        #expect(Money.minorUnits(amount) == nil, "\(text)")
    }

    @Test func notANumberIsNil() {
        #expect(Money.minorUnits(Decimal.nan) == nil)
    }

    /// Either side of 10^14, where the integer path gives way to Decimal arithmetic, and at random: the cents an
    /// integer computes from the same digits (the oracle never reads a Decimal).
    @Test func centsAgreeWithIntegerArithmeticEitherSideOfTheFastPath() throws {
        var generator = SystemRandomNumberGenerator()
        var cases: [(digits: Int64, exponent: Int)] = []
        for digits: Int64 in [99_999_999_999_999, 100_000_000_000_000, 100_000_000_000_001, 1, 0] {
            for exponent in -3...3 { cases.append((digits, exponent)) }
        }
        for _ in 0..<2_000 {
            cases.append((Int64.random(in: 0...1_000_000_000_000_000, using: &generator), Int.random(in: -3...3)))
        }
        for (digits, exponent) in cases {
            let text = "\(digits)e\(exponent)"
            let amount = try #require(Decimal(string: text, locale: Locale(identifier: "en_US_POSIX")))
            // digits x 10^(exponent + 2) cents, when whole and inside Int64.
            var expected: Int64? = exponent + 2 >= 0 ? digits : (digits % 10 == 0 ? digits / 10 : nil)
            for _ in 0..<max(0, exponent + 2) {
                guard let cents = expected else { break }
                let (product, overflow) = cents.multipliedReportingOverflow(by: 10)
                expected = overflow ? nil : product
            }
            #expect(Money.minorUnits(amount) == expected, "\(text)")
            if digits > 0 { #expect(Money.minorUnits(-amount) == expected.map { -$0 }, "-\(text)") }
        }
    }

    /// Two places, a sign only below zero, the whole part without leading zeros: the oracle is the integer's own
    /// description, split two digits from its end.
    @Test func centsArePrintedWithTwoPlaces() {
        var generator = SystemRandomNumberGenerator()
        var cases: [Int64] = [0, 1, -1, 5, -5, 10, 99, 100, -100, 101, 2516, -300, 1_234_567_891, .max, .min, .min + 1]
        for _ in 0..<2_000 { cases.append(Int64.random(in: -10_000_000...10_000_000, using: &generator)) }
        for cents in cases {
            var digits = String(cents.magnitude)
            while digits.count < 3 { digits = "0" + digits }
            let expected = (cents < 0 ? "-" : "") + digits.dropLast(2) + "." + digits.suffix(2)
            #expect(Money.plain(cents: cents) == expected, "\(cents)")
        }
        #expect(Money.plain(cents: 2516) == "25.16")
        #expect(Money.plain(cents: -5) == "-0.05")
        #expect(Money.plain(cents: .min) == "-92233720368547758.08")
    }

    @Test func centsMadeIntoADecimalComeBack() {
        for cents: Int64 in [0, 1, -1, 99, 100, 2516, -300, 1_234_567_891, 99_999_999_999_999_999] {
            #expect(Money.minorUnits(Money.decimal(cents: cents)) == cents)
        }
    }
}
