import Foundation
import StoreContract
import Synchronization

/// The sinks muted per child ("Mute today" on a popup): kept in the store (shared by every replica on PostgreSQL),
/// read by the rules from memory (the planner runs inside the store's write transaction and must not touch the
/// database).
public final class MuteList: Sendable {
    private let store: (any MuteStore)?
    private let mutes: Mutex<[String: Date]>

    /// Loads the mutes still running from `store` (nil: in memory only).
    public init(store: (any MuteStore)?) {
        self.store = store
        let running = (try? store?.mutes(at: Date())) ?? []
        mutes = Mutex(
            Dictionary(running.map { ("\($0.sink)|\($0.childId.lowercased)", $0.until) }, uniquingKeysWith: max))
    }

    public func isMuted(sink: String, child: UUID, at now: Date = Date()) -> Bool {
        mutes.withLock { m in
            // Asked for every alert planned: with nothing muted (the usual case), no key is built.
            guard !m.isEmpty else { return false }
            let child = child.lowercased
            return m["\(sink)|\(child)"].map { $0 > now } ?? false
                || m["\(Mute.everySink)|\(child)"].map { $0 > now } ?? false
        }
    }

    /// Reads the mutes again (another process changed them: `allowance-relay mute add|remove`); returns how many run.
    @discardableResult
    public func refresh() -> Int {
        guard let store, let running = try? store.mutes(at: Date()) else { return mutes.withLock { $0.count } }
        let fresh = Dictionary(running.map { ("\($0.sink)|\($0.childId.lowercased)", $0.until) }, uniquingKeysWith: max)
        mutes.withLock { $0 = fresh }
        return fresh.count
    }

    /// Mutes `sink` for `child` until the next midnight in `timeZone`; returns that time.
    @discardableResult
    public func muteForToday(
        sink: String, child: UUID, timeZone: TimeZone, now: Date = Date()
    ) throws(StoreError) -> Date {
        let until = Self.nextMidnight(after: now, in: timeZone)
        try store?.mute(Mute(sink: sink, childId: child, until: until))
        mutes.withLock { $0["\(sink)|\(child.lowercased)"] = until }
        return until
    }

    public static func nextMidnight(after date: Date, in timeZone: TimeZone) -> Date {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = timeZone
        return calendar.date(byAdding: .day, value: 1, to: calendar.startOfDay(for: date))
            ?? date.addingTimeInterval(86400)
    }
}
