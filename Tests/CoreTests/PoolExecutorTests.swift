import Foundation
import Synchronization
import TestSupport
import Testing

@testable import Core

/// The relay's default executor: threads started when work comes, a sleep kept by the pool's alarms (not
/// libdispatch's timers), one more thread when every thread is stuck, and the extra ones gone after a while.
@Suite struct PoolExecutorTests {
    @Test func jobsRunOnThePoolsThreadsStartedWhenWorkComes() async {
        let pool = PoolExecutor(name: "test-pool", keep: 2)
        #expect(pool.threadCount == 0, "no thread before the first job")
        let names = await Task(executorPreference: pool) {
            await withTaskGroup(of: String.self) { group in
                for _ in 0..<8 { group.addTask { ProcessThreads.current() } }
                return await group.reduce(into: [String]()) { $0.append($1) }
            }
        }.value
        #expect(names.count == 8 && names.allSatisfy { $0 == "test-pool" }, "\(names)")
        #expect((1...2).contains(pool.threadCount), "at most the kept threads for short jobs: \(pool.threadCount)")
    }

    /// `Task.sleep` in a task on the pool asks the pool to wake it: the hand clock holds the alarm, and the sleep
    /// (an hour of it) ends when the clock is moved past it, not before.
    @Test func aSleepWaitsOnThePoolsAlarms() async {
        let clock = HandClock()
        let pool = PoolExecutor(name: "test-pool", keep: 1, alarms: clock)
        let woke = Atomic<Bool>(false)
        let sleeper = Task(executorPreference: pool) {
            try? await Task.sleep(for: .seconds(3600))
            woke.store(true, ordering: .releasing)
        }
        let held = await eventually(.seconds(5)) { clock.pending == 1 }
        #expect(held, "the sleep set one alarm on the pool's clock")
        if !held { sleeper.cancel() }  // not an hour's wait for the verdict
        clock.advance(by: .seconds(3599))
        try? await Task.sleep(for: .milliseconds(50))
        let early = woke.load(ordering: .acquiring)
        #expect(!early, "not a second early")
        clock.advance(by: .seconds(1))
        await sleeper.value
        let late = woke.load(ordering: .acquiring)
        #expect(late)
    }

    @Test func aCancelledSleepEndsAtOnce() async {
        let pool = PoolExecutor(name: "test-pool", keep: 1)
        let start = ContinuousClock.now
        let sleeper = Task(executorPreference: pool) { try? await Task.sleep(for: .seconds(3600)) }
        try? await Task.sleep(for: .milliseconds(20))
        sleeper.cancel()
        await sleeper.value
        // Not the hour: a bound far from both, since the suite's start holds the machine's two cores for seconds.
        #expect(ContinuousClock.now - start < .seconds(60), "ended after \(ContinuousClock.now - start)")
    }

    /// With its one kept thread blocked by a job that waits for the next one, the pool adds a thread (as
    /// libdispatch's monitor does for a blocked worker) instead of waiting forever; without work, that thread ends.
    @Test func aStuckPoolAddsAThreadAndLetsItGoWhenIdle() async {
        let pool = PoolExecutor(name: "test-pool", keep: 1, linger: .milliseconds(100))
        let released = DispatchSemaphore(value: 0)
        let first = Task(executorPreference: pool) { released.wait() }  // blocks the one thread
        #expect(await eventually(.seconds(5)) { pool.threadCount == 1 })
        // Counted by the second job itself, while the first still holds its thread: after both, the added thread
        // may already have lingered out (100 ms), as it did once in a loaded run.
        let second = Task(executorPreference: pool) { () -> Int in
            defer { released.signal() }
            return pool.threadCount
        }
        #expect(await second.value == 2, "one thread added while the first was stuck")
        await first.value
        #expect(await eventually(.seconds(5)) { pool.threadCount == 1 }, "the added thread ends without work")
    }
}
