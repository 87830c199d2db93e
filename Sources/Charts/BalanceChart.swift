import CCairo
import Foundation

/// A balance over a period as a picture: the balance as a stepped line (it changes at each transaction and holds
/// between them), each goal as a dashed horizontal line with its name, the period's first and last days and the
/// balance's scale on the axes. Drawn with cairo to PNG, with cairo's own font (no font files needed), so the same
/// picture comes out on a server without a desktop.
public struct BalanceChart: Sendable {
    public struct Goal: Sendable, Equatable {
        public var name: String
        public var price: Double

        public init(name: String, price: Double) {
            self.name = name
            self.price = price
        }
    }

    public var title: String
    /// The balance at each change, in time order; the first is the balance at `from`.
    public var points: [(at: Date, balance: Double)]
    public var from: Date
    public var to: Date
    public var goals: [Goal]
    public var width = 640
    public var height = 320

    public init(title: String, points: [(at: Date, balance: Double)], from: Date, to: Date, goals: [Goal] = []) {
        self.title = title
        self.points = points
        self.from = from
        self.to = to
        self.goals = goals
    }

    /// The plot's margins: room for the title above, the scale on the left, the dates below.
    static let margin = (left: 64.0, right: 16.0, top: 36.0, bottom: 32.0)
    /// The balance's colour (a blue that reads on white and in grey print) and the goals' (green).
    static let lineColor = (r: 0.13, g: 0.40, b: 0.80)
    static let goalColor = (r: 0.10, g: 0.60, b: 0.25)

    /// The value range shown: every balance and goal, with zero in it, a little room above.
    var range: (low: Double, high: Double) {
        let values = points.map(\.balance) + goals.map(\.price) + [0]
        let low = values.min() ?? 0
        var high = values.max() ?? 1
        if high - low < 1 { high = low + 1 }
        return (low, high + (high - low) * 0.08)
    }

    /// Where a value is drawn, in pixels from the top.
    public func y(_ value: Double) -> Double {
        let (low, high) = range
        let top = Self.margin.top
        let bottom = Double(height) - Self.margin.bottom
        return bottom - (value - low) / (high - low) * (bottom - top)
    }

    /// Where a time is drawn, in pixels from the left.
    public func x(_ date: Date) -> Double {
        let left = Self.margin.left
        let right = Double(width) - Self.margin.right
        let span = max(1, to.timeIntervalSince(from))
        return left + min(1, max(0, date.timeIntervalSince(from) / span)) * (right - left)
    }

    /// The picture as PNG bytes.
    public func png() throws(ChartError) -> [UInt8] {
        guard width >= 120, height >= 80 else { throw ChartError("a chart needs at least 120 x 80 pixels") }
        guard let surface = cairo_image_surface_create(CAIRO_FORMAT_ARGB32, Int32(width), Int32(height)) else {
            throw ChartError("cairo could not make a surface")
        }
        defer { cairo_surface_destroy(surface) }
        guard let cr = cairo_create(surface) else { throw ChartError("cairo could not make a context") }
        defer { cairo_destroy(cr) }
        draw(cr)
        cairo_surface_flush(surface)
        final class Sink { var bytes: [UInt8] = [] }
        let sink = Sink()
        let status = withExtendedLifetime(sink) {
            cairo_surface_write_to_png_stream(
                surface,
                { context, data, length in
                    guard let context, let data else { return CAIRO_STATUS_WRITE_ERROR }
                    Unmanaged<Sink>.fromOpaque(context).takeUnretainedValue().bytes.append(
                        contentsOf: UnsafeBufferPointer(start: data, count: Int(length)))
                    return CAIRO_STATUS_SUCCESS
                }, Unmanaged.passUnretained(sink).toOpaque())
        }
        guard status == CAIRO_STATUS_SUCCESS else {
            throw ChartError("cairo could not write the PNG: \(String(cString: cairo_status_to_string(status)))")
        }
        return sink.bytes
    }

    private func draw(_ cr: OpaquePointer) {
        let w = Double(width)
        let h = Double(height)
        let m = Self.margin
        cairo_set_source_rgb(cr, 1, 1, 1)
        cairo_paint(cr)
        cairo_select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL)
        // Title.
        cairo_set_source_rgb(cr, 0.1, 0.1, 0.1)
        cairo_set_font_size(cr, 15)
        text(cr, title, x: m.left, y: 22)
        // Axes and the zero line.
        cairo_set_line_width(cr, 1)
        cairo_set_source_rgb(cr, 0.55, 0.55, 0.55)
        cairo_move_to(cr, m.left + 0.5, m.top)
        cairo_line_to(cr, m.left + 0.5, h - m.bottom + 0.5)
        cairo_line_to(cr, w - m.right, h - m.bottom + 0.5)
        cairo_stroke(cr)
        // The scale: the lowest, the highest and zero, rounded.
        cairo_set_font_size(cr, 11)
        let (low, high) = range
        for value in Set([low, 0, high].map { ($0 * 100).rounded() / 100 }).sorted() {
            let label = String(format: "%.2f", value)
            var extents = cairo_text_extents_t()
            cairo_text_extents(cr, label, &extents)
            text(cr, label, x: m.left - 6 - extents.x_advance, y: y(value) + 4)
        }
        // The period's ends.
        let days = DateFormatter()
        days.locale = Locale(identifier: "en_US_POSIX")
        days.timeZone = TimeZone(identifier: "UTC")
        days.dateFormat = "d MMM"
        text(cr, days.string(from: from), x: m.left, y: h - 12)
        let end = days.string(from: to)
        var extents = cairo_text_extents_t()
        cairo_text_extents(cr, end, &extents)
        text(cr, end, x: w - m.right - extents.x_advance, y: h - 12)
        // Goals, dashed, named at their right end.
        for goal in goals {
            cairo_set_source_rgb(cr, Self.goalColor.r, Self.goalColor.g, Self.goalColor.b)
            var dash: [Double] = [6, 4]
            cairo_set_dash(cr, &dash, 2, 0)
            cairo_set_line_width(cr, 1.5)
            cairo_move_to(cr, m.left, y(goal.price))
            cairo_line_to(cr, w - m.right, y(goal.price))
            cairo_stroke(cr)
            cairo_set_dash(cr, nil, 0, 0)
            let label = "\(goal.name) \(String(format: "%.2f", goal.price))"
            cairo_text_extents(cr, label, &extents)
            text(cr, label, x: w - m.right - extents.x_advance - 2, y: y(goal.price) - 4)
        }
        // The balance: it holds until the next change, and until the end of the period after the last.
        guard let first = points.first else { return }
        cairo_set_source_rgb(cr, Self.lineColor.r, Self.lineColor.g, Self.lineColor.b)
        cairo_set_line_width(cr, 2.5)
        cairo_move_to(cr, x(first.at), y(first.balance))
        var last = first.balance
        for p in points.dropFirst() {
            cairo_line_to(cr, x(p.at), y(last))
            cairo_line_to(cr, x(p.at), y(p.balance))
            last = p.balance
        }
        cairo_line_to(cr, x(to), y(last))
        cairo_stroke(cr)
    }

    private func text(_ cr: OpaquePointer, _ s: String, x: Double, y: Double) {
        cairo_move_to(cr, x, y)
        cairo_show_text(cr, s)
    }
}

/// A chart that could not be drawn, in words.
public struct ChartError: Error, Sendable, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }
}
