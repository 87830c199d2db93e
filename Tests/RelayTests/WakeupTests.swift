import Core
import Foundation
import Synchronization
import TestSupport
import Testing

@testable import Relay

/// The workers' sleep: a wait that ended early by a signal must leave nothing behind, or the next wait returns at
/// once and an idle worker spins (it did: a cancelled timer used to signal on its way out). On a clock the test moves
/// by hand: a timeout ends a wait when its time comes, not a moment before, and nobody sleeps it out.
@Suite struct WakeupTests {
    @Test func aSignalEndsOneWaitOnly() async {
        let clock = HandClock()
        let wakeup = Wakeup(clock: clock)
        wakeup.signal()
        await wakeup.wait(upTo: .seconds(30))  // the pending signal: returns at once, no alarm set
        #expect(clock.pending == 0)
        let next = Task { await wakeup.wait(upTo: .milliseconds(300)) }
        #expect(await parked(wakeup, clock))
        clock.advance(by: .milliseconds(299))
        #expect(wakeup.isParked, "the next wait is still asleep 1 ms before its time")
        clock.advance(by: .milliseconds(1))
        #expect(await next.value == false, "says its time ended it")
        #expect(!wakeup.isParked && clock.pending == 0)
    }

    @Test func aSignalDuringAWaitWakesIt() async {
        let clock = HandClock()
        let wakeup = Wakeup(clock: clock)
        let waiter = Task { await wakeup.wait(upTo: .seconds(30)) }
        #expect(await parked(wakeup, clock))
        wakeup.signal()
        #expect(await waiter.value, "says a signal ended it")
        #expect(clock.pending == 0, "the signal took the wait's alarm with it")
        let again = Task { await wakeup.wait(upTo: .milliseconds(300)) }
        #expect(await parked(wakeup, clock))
        clock.advance(by: .milliseconds(299))
        #expect(wakeup.isParked, "the signal was spent on the first wait")
        clock.advance(by: .milliseconds(1))
        #expect(await again.value == false, "says its time ended it")
    }

    @Test func anAlarmOfAnEndedWaitDoesNotEndTheNext() async {
        let clock = HandClock()
        let wakeup = Wakeup(clock: clock)
        let first = Task { await wakeup.wait(upTo: .milliseconds(100)) }
        #expect(await parked(wakeup, clock))
        wakeup.signal()
        #expect(await first.value, "says a signal ended it")
        let second = Task { await wakeup.wait(upTo: .seconds(1)) }
        #expect(await parked(wakeup, clock))
        clock.advance(by: .milliseconds(100))  // the first wait's time
        #expect(wakeup.isParked)
        clock.advance(by: .milliseconds(900))
        #expect(await second.value == false, "says its own time ended it")
    }

    /// A wait without a timeout sets no alarm (an idle committer costs the clock nothing) and a signal ends it.
    @Test func aWaitWithoutATimeoutSetsNoAlarmAndASignalEndsIt() async {
        let clock = HandClock()
        let wakeup = Wakeup(clock: clock)
        let waiter = Task { await wakeup.wait(upTo: nil) }
        for _ in 0..<5000 where !wakeup.isParked { await Task.yield() }
        #expect(wakeup.isParked && clock.pending == 0, "asleep, no alarm set")
        clock.advance(by: .seconds(86_400))
        #expect(wakeup.isParked, "a day later, still asleep")
        wakeup.signal()
        #expect(await waiter.value, "says a signal ended it")
    }

    /// Until the waiter is asleep with its alarm set: a signal before that is only kept as pending.
    private func parked(_ wakeup: Wakeup, _ clock: HandClock) async -> Bool {
        for _ in 0..<5000 where !(wakeup.isParked && clock.pending == 1) { await Task.yield() }
        return wakeup.isParked && clock.pending == 1
    }
}

/// A wait that a signal ended takes its timeout's alarm with it: a worker that waits up to a minute after every
/// delivery must not leave a minute's worth of alarms (and their wake-ups) behind.
@Suite struct WakeupAlarmTests {
    @Test func aWaitEndedBySignalsLeavesNoAlarmSet() async {
        let clock = AlarmClock()
        let wakeup = Wakeup(clock: clock)
        for _ in 0..<50 {
            let waiter = Task { await wakeup.wait(upTo: .seconds(60)) }
            // Until the waiter is asleep with its alarm set (a signal before that would only be kept as pending).
            var spins = 0
            while clock.pending != 1, spins < 5000 {
                try? await Task.sleep(for: .milliseconds(1))
                spins += 1
            }
            #expect(clock.pending == 1)
            wakeup.signal()
            #expect(await waiter.value, "says a signal ended it")
        }
        #expect(clock.pending == 0)
    }
}
