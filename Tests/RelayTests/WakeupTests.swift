import Foundation
import Core
import Testing

@testable import Relay

/// The workers' sleep: a wait that ended early by a signal must leave nothing behind, or the next wait returns at
/// once and an idle worker spins (it did: a cancelled timer used to signal on its way out).
@Suite struct WakeupTests {
    @Test func aSignalEndsOneWaitOnly() async {
        let wakeup = Wakeup()
        wakeup.signal()
        let first = ContinuousClock.now
        await wakeup.wait(upTo: .seconds(30))  // the pending signal: returns at once
        #expect(ContinuousClock.now - first < .seconds(20))
        let start = ContinuousClock.now
        await wakeup.wait(upTo: .milliseconds(300))
        #expect(ContinuousClock.now - start >= .milliseconds(290), "the next wait slept its time")
    }

    @Test func aSignalDuringAWaitWakesIt() async {
        let wakeup = Wakeup()
        let start = ContinuousClock.now
        Task {
            try? await Task.sleep(for: .milliseconds(50))
            wakeup.signal()
        }
        await wakeup.wait(upTo: .seconds(30))
        #expect(ContinuousClock.now - start < .seconds(20))
        let again = ContinuousClock.now
        await wakeup.wait(upTo: .milliseconds(300))
        #expect(ContinuousClock.now - again >= .milliseconds(290))
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
            await waiter.value
        }
        #expect(clock.pending == 0)
    }
}
