import AllowanceAPI
import Foundation

/// Times as the family reads them: in relay.time_zone, with the zone said.
public enum LocalTime {
    private static func components(_ date: Date, _ zone: TimeZone) -> DateComponents {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = zone
        return calendar.dateComponents([.year, .month, .day, .hour, .minute, .second], from: date)
    }

    /// "2026-11-24 23:00 Europe/Paris".
    public static func text(_ date: Date, _ zone: TimeZone) -> String {
        let c = components(date, zone)
        return String(format: "%04d-%02d-%02d %02d:%02d ", c.year!, c.month!, c.day!, c.hour!, c.minute!)
            + zone.identifier
    }

    /// "2026-11-24 23:00:05": a table's cell, its zone said once in the column's title.
    public static func cell(_ date: Date, _ zone: TimeZone) -> String {
        let c = components(date, zone)
        return String(format: "%04d-%02d-%02d %02d:%02d:%02d", c.year!, c.month!, c.day!, c.hour!, c.minute!, c.second!)
    }

    /// ISO 8601 with the zone's offset: "2026-11-24T23:00:00+01:00".
    public static func iso(_ date: Date, _ zone: TimeZone) -> String {
        let c = components(date, zone)
        let offset = zone.secondsFromGMT(for: date)
        let sign = offset < 0 ? "-" : "+"
        return String(
            format: "%04d-%02d-%02dT%02d:%02d:%02d%@%02d:%02d", c.year!, c.month!, c.day!, c.hour!, c.minute!,
            c.second!, sign, abs(offset) / 3600, abs(offset) % 3600 / 60)
    }

    /// HH:MM (the next such time after `now`), YYYY-MM-DD HH:MM (in `zone`), or ISO 8601 with a zone.
    public static func parse(_ text: String, after now: Date, in zone: TimeZone) -> Date? {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = zone
        let parts = text.split(separator: " ")
        func hm(_ s: Substring) -> (Int, Int)? {
            let p = s.split(separator: ":")
            guard p.count == 2, let h = Int(p[0]), let m = Int(p[1]), (0..<24).contains(h), (0..<60).contains(m) else {
                return nil
            }
            return (h, m)
        }
        if parts.count == 1, let (h, m) = hm(parts[0]) {
            return calendar.nextDate(
                after: now, matching: DateComponents(hour: h, minute: m), matchingPolicy: .nextTime)
        }
        if parts.count == 2, let (h, m) = hm(parts[1]) {
            let d = parts[0].split(separator: "-").compactMap { Int($0) }
            guard d.count == 3 else { return nil }
            return calendar.date(from: DateComponents(year: d[0], month: d[1], day: d[2], hour: h, minute: m))
        }
        return ISODate.parse(text)
    }
}
