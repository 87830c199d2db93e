import Foundation
import Testing

@testable import Charts

/// The chart's geometry and its PNG, without the relay. What the picture shows is read back with Pillow in
/// SummaryShowTests.
@Suite struct BalanceChartTests {
    let start = Date(timeIntervalSince1970: 1_795_000_000)

    func chart(_ balances: [Double], goals: [BalanceChart.Goal] = []) -> BalanceChart {
        BalanceChart(
            title: "Alice, this week",
            points: balances.enumerated().map { (start.addingTimeInterval(Double($0.offset) * 3600), $0.element) },
            from: start, to: start.addingTimeInterval(86400), goals: goals)
    }

    @Test func aHigherValueIsDrawnHigherAndTimeRunsLeftToRight() {
        let c = chart([10, 25, 5], goals: [.init(name: "bike", price: 40)])
        #expect(c.y(40) < c.y(25) && c.y(25) < c.y(10) && c.y(10) < c.y(0))
        #expect(c.y(40) >= BalanceChart.margin.top, "the highest goal fits in the plot")
        #expect(c.x(start) < c.x(start.addingTimeInterval(3600)))
        #expect(c.x(start.addingTimeInterval(-3600)) == c.x(start), "a time before the period is drawn at its start")
    }

    @Test func aNegativeBalanceIsInsideThePlot() {
        let c = chart([3, -4])
        #expect(c.y(-4) <= Double(c.height) - BalanceChart.margin.bottom && c.y(0) < c.y(-4))
    }

    @Test func thePNGHasTheSizeAskedFor() throws {
        var c = chart([10, 12])
        c.width = 400
        c.height = 200
        let png = try c.png()
        #expect(Array(png.prefix(8)) == [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A], "the PNG signature")
        // IHDR, the first chunk: width and height, big-endian, at bytes 16 and 20.
        let be = { (at: Int) in png[at..<at + 4].reduce(0) { $0 << 8 | Int($1) } }
        #expect(Array(png[12..<16]) == Array("IHDR".utf8) && be(16) == 400 && be(20) == 200)
    }

    @Test func aChartTooSmallToReadIsAnError() {
        var c = chart([1])
        c.width = 50
        #expect(throws: ChartError.self) { try c.png() }
    }
}
