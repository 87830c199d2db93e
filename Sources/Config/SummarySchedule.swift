import Foundation

/// When a summary rule speaks: `daily at 19:00` or `weekly on sunday at 18:00`, in the family's time zone.
public struct SummarySchedule: Sendable, Equatable {
    public enum Period: Sendable, Equatable {
        case daily
        /// 1 = Sunday ... 7 = Saturday (Calendar's weekday).
        case weekly(weekday: Int)
    }

    public let period: Period
    public let minute: Int  // minutes after midnight

    public static let weekdays = ["sunday", "monday", "tuesday", "wednesday", "thursday", "friday", "saturday"]

    public init?(_ text: String) {
        let words = text.lowercased().split(separator: " ").map(String.init)
        func time(_ s: String) -> Int? {
            let hm = s.split(separator: ":")
            guard hm.count == 2, let h = Int(hm[0]), let m = Int(hm[1]), (0..<24).contains(h), (0..<60).contains(m)
            else { return nil }
            return h * 60 + m
        }
        if words.count == 3, words[0] == "daily", words[1] == "at", let t = time(words[2]) {
            period = .daily
            minute = t
        } else if words.count == 5, words[0] == "weekly", words[1] == "on",
            let day = Self.weekdays.firstIndex(where: { $0.hasPrefix(words[2]) && words[2].count >= 3 }),
            words[3] == "at", let t = time(words[4])
        {
            period = .weekly(weekday: day + 1)
            minute = t
        } else {
            return nil
        }
    }

    /// "today" or "this week": how the message names the period.
    public var label: String { period == .daily ? "today" : "this week" }

    /// The wall-clock time this schedule names, as Calendar matches it: on a day where it does not exist (the spring
    /// change skips it) the next time that does; on a day where it comes twice (autumn), the first.
    private var components: DateComponents {
        var c = DateComponents(hour: minute / 60, minute: minute % 60, second: 0)
        if case .weekly(let weekday) = period { c.weekday = weekday }
        return c
    }

    private func calendar(_ timeZone: TimeZone) -> Calendar {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = timeZone
        return calendar
    }

    /// The last time this schedule fell due at or before `date`.
    public func lastDue(atOrBefore date: Date, in timeZone: TimeZone) -> Date {
        // Backward from just after `date`: a due time equal to `date` is the last one.
        let after = date.addingTimeInterval(0.001)
        return calendar(timeZone).nextDate(
            after: after, matching: components, matchingPolicy: .nextTime, repeatedTimePolicy: .first,
            direction: .backward) ?? date
    }

    /// The next time this schedule falls due after `date`: later the same day when that time has not come yet.
    public func nextDue(after date: Date, in timeZone: TimeZone) -> Date {
        calendar(timeZone).nextDate(
            after: date, matching: components, matchingPolicy: .nextTime, repeatedTimePolicy: .first,
            direction: .forward)
            ?? date.addingTimeInterval(60)
    }

    /// The start of the period that ends at `due`: the due time before it (a day of 23 or 25 hours across a
    /// daylight-saving change).
    public func periodStart(endingAt due: Date, in timeZone: TimeZone) -> Date {
        lastDue(atOrBefore: due.addingTimeInterval(-0.001), in: timeZone)
    }
}
