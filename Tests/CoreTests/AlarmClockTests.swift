import Core
import Glibc
import Synchronization
import TestSupport
import Testing

/// The process's one deadline thread: alarms ring in order of their time, a cancelled one never rings, and one set
/// earlier than the alarm the thread sleeps towards wakes it in time.
@Suite struct AlarmClockTests {
    final class Rings: Sendable {
        let order = Mutex<[Int]>([])
        func add(_ n: Int) { order.withLock { $0.append(n) } }
        var value: [Int] { order.withLock { $0 } }
    }

    private func waitFor(_ rings: Rings, count: Int, upTo limit: Duration = .seconds(10)) async {
        let start = ContinuousClock.now
        while rings.value.count < count, ContinuousClock.now - start < limit {
            try? await Task.sleep(for: .milliseconds(5))
        }
    }

    @Test func alarmsRingInTheOrderOfTheirTimeAndACancelledOneNever() async {
        let clock = AlarmClock.shared
        let rings = Rings()
        clock.set(after: .milliseconds(300)) { rings.add(3) }
        let cancelled = clock.set(after: .milliseconds(100)) { rings.add(99) }
        clock.set(after: .milliseconds(50)) { rings.add(1) }
        clock.set(after: .milliseconds(200)) { rings.add(2) }
        clock.cancel(cancelled)
        await waitFor(rings, count: 3)
        try? await Task.sleep(for: .milliseconds(100))
        #expect(rings.value == [1, 2, 3])
    }

    @Test func anEarlierAlarmWakesAClockThatSleepsTowardsALaterOne() async {
        let clock = AlarmClock.shared
        let rings = Rings()
        let late = clock.set(after: .seconds(60)) { rings.add(60) }
        try? await Task.sleep(for: .milliseconds(20))  // the thread now sleeps towards the 60 s alarm
        let start = ContinuousClock.now
        clock.set(after: .milliseconds(50)) { rings.add(1) }
        await waitFor(rings, count: 1)
        #expect(rings.value == [1])
        // Not at the 60 s alarm's time: a bound far from both, since a loaded machine (the whole suite at once, two
        // cores) once delayed this test's own polling by 5.5 s.
        #expect(ContinuousClock.now - start < .seconds(30), "rang after \(ContinuousClock.now - start)")
        clock.cancel(late)
    }

    /// The thread sleeps on a timer that the canceller moves: an alarm set and cancelled before its time wakes
    /// nobody (before, the thread woke at each one's time, and at each set), and one left set rings as before.
    @Test func anAlarmCancelledBeforeItsTimeWakesNobody() async throws {
        let clock = AlarmClock(name: "alarm-cancel")
        let rings = Rings()
        let sleeps = { ProcessThreads.sleeps(of: getpid()).filter { $0.name == "alarm-cancel" }.map(\.switches).first }
        // Started, and gone to sleep with nothing set (its first sleep is its wait on the timer).
        #expect(await ProcessThreads.asleep("alarm-cancel"), "the clock's thread waits")
        let asleep = sleeps() ?? 0
        for n in 0..<5 { clock.cancel(clock.set(after: .milliseconds(50 + 10 * n)) { rings.add(n) }) }
        try await Task.sleep(for: .milliseconds(300))  // the window: each cancelled alarm's time passes in it
        #expect(rings.value.isEmpty)
        #expect((sleeps() ?? 0) - asleep == 0, "the clock's thread woke \((sleeps() ?? 0) - asleep) times")
        clock.set(after: .milliseconds(50)) { rings.add(9) }
        await waitFor(rings, count: 1)
        #expect(rings.value == [9])
        #expect((sleeps() ?? 0) - asleep >= 1, "it woke to ring the one left set")
    }

    @Test func anAlarmInThePastRingsAtOnce() async {
        let rings = Rings()
        AlarmClock.shared.set(at: .now - .seconds(1)) { rings.add(1) }
        await waitFor(rings, count: 1, upTo: .seconds(5))
        #expect(rings.value == [1])
    }
}
