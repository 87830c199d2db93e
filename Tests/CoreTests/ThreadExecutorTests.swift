import Core
import Foundation
import Synchronization
import TestSupport
import Testing

/// The relay's own thread: the tasks that prefer it run there, and so do the actors they call and the continuations
/// another thread resumes; after its shutdown, what still comes runs on the global pool rather than nowhere.
@Suite struct ThreadExecutorTests {
    /// A default actor: no executor of its own, so it runs where its caller's task prefers.
    actor Counter {
        var seen: [String] = []
        func note() { seen.append(ProcessThreads.current()) }
    }

    @Test func aPreferringTaskItsActorsAndItsResumptionsRunOnTheThread() async {
        let executor = ThreadExecutor(name: "test-relay")
        defer { executor.shutdown() }
        let counter = Counter()
        let names = await withTaskExecutorPreference(executor) { () async -> [String] in
            var names = [ProcessThreads.current()]
            await counter.note()
            // Resumed from a thread of its own, as the HTTP client's and the connection's threads resume their waiters.
            await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
                Thread { c.resume() }.start()
            }
            names.append(ProcessThreads.current())
            // A child task inherits the preference.
            names.append(
                await withTaskGroup(of: String.self) { group in
                    group.addTask { ProcessThreads.current() }
                    return await group.next() ?? "none"
                })
            return names
        }
        #expect(names == ["test-relay", "test-relay", "test-relay"])
        #expect(await counter.seen == ["test-relay"])
        #expect(ProcessThreads.current() != "test-relay", "outside the preference, back on the pool")
    }

    /// The shutdown returns once the thread has wholly ended, so that its end never overlaps the process's exit.
    @Test func theShutdownReturnsOnceTheThreadHasEnded() async {
        let executor = ThreadExecutor(name: "test-joined")
        let ran = await withTaskExecutorPreference(executor) { ProcessThreads.current() }
        #expect(ran == "test-joined")
        #expect(ProcessThreads.names().contains("test-joined"))
        executor.shutdown()
        // pthread_join returns once the kernel has cleared the thread's id in its exit (CLONE_CHILD_CLEARTID), a
        // moment before the task leaves /proc: under a full suite's load that moment showed. The thread has ended
        // (its id is cleared, it runs nothing more); /proc says so within milliseconds, never a poll of seconds.
        var listed = ProcessThreads.names().contains("test-joined")
        for _ in 0..<100 where listed {
            usleep(2_000)
            listed = ProcessThreads.names().contains("test-joined")
        }
        #expect(!listed, "the thread is gone once shutdown() has returned")
        executor.shutdown()  // a second call has nothing left to wait for
    }

    /// Called from a job on the thread itself, the shutdown cannot wait for the thread: it lets it end by itself.
    @Test func aShutdownFromTheThreadItselfDoesNotWaitForItself() async {
        let executor = ThreadExecutor(name: "test-self-end")
        let ran = await withTaskExecutorPreference(executor) { () async -> String in
            executor.shutdown()
            return ProcessThreads.current()
        }
        #expect(ran == "test-self-end")
    }

    @Test func aJobAfterTheShutdownRunsOnThePool() async {
        let executor = ThreadExecutor(name: "test-ended")
        let task = Task(executorPreference: executor) { () async -> String in
            // Waits past the shutdown, then is resumed: the job that continues it comes after the thread ended.
            await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
                Thread {
                    executor.shutdown()
                    Thread.sleep(forTimeInterval: 0.2)
                    c.resume()
                }.start()
            }
            return ProcessThreads.current()
        }
        let name = await task.value
        #expect(name != "test-ended" && name != "?")
    }
}

/// A sleep in a task that prefers the thread is kept by the executor's alarms and resumes on the thread: the hand
/// clock holds it, and an hour's sleep ends when the clock passes it.
@Suite struct ThreadExecutorSleepTests {
    @Test func aSleepWaitsOnTheExecutorsAlarmsAndResumesOnTheThread() async {
        let clock = HandClock()
        let executor = ThreadExecutor(name: "test-sleeper", alarms: clock)
        defer { executor.shutdown() }
        let sleeper = Task(executorPreference: executor) { () -> String in
            try? await Task.sleep(for: .seconds(3600))
            return ProcessThreads.current()
        }
        let held = await eventually(.seconds(5)) { clock.pending == 1 }
        #expect(held, "the sleep set one alarm on the executor's clock")
        if !held { sleeper.cancel() }  // not an hour's wait for the verdict
        clock.advance(by: .seconds(3600))
        #expect(await sleeper.value == "test-sleeper")
    }
}
