/// The count in the 12 bits after a version 7 UUID's version (RFC 9562's method 1): ids asked for within one
/// millisecond, or with a clock up to a second behind the last id, take the last id's millisecond and count up from
/// it; past 4,095 the millisecond moves on by one. A new millisecond starts its count at random below 2,048 (room for a
/// burst), so two processes rarely start at the same count.
struct TimeOrderedCount {
    private(set) var millis: UInt64 = 0
    private(set) var count: UInt64 = 0

    /// The millisecond and count of the next id asked for at `asked` (milliseconds since 1970); `randomStart`'s top 11
    /// bits start a new millisecond's count.
    mutating func next(at asked: UInt64, randomStart: UInt64) -> (millis: UInt64, count: UInt64) {
        if asked <= millis, millis - asked < 1000 {
            count += 1
            if count > 0xFFF { (millis, count) = (millis + 1, 0) }
        } else {
            (millis, count) = (asked, randomStart >> 53)
        }
        return (millis, count)
    }
}
