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

/// A thread that drives an event loop of its own (as the HTTP client's thread drives libcurl's): it waits in the
/// loop, runs the loop's turn after its jobs and after each wait, and only a job from another thread wakes the loop.
@Suite struct ThreadExecutorLoopTests {
    /// A loop on two pipes: one for wake-ups, one an event source another thread writes to. A byte on the source
    /// resumes the task waiting for it, from `turn()` on the loop's thread.
    final class PipeLoop: ThreadLoop, @unchecked Sendable {
        // @unchecked: `waiter` is set from jobs on the thread and taken in `turn()`, on the thread too.
        let wakeFDs: [Int32]
        let sourceFDs: [Int32]
        let wakes = Atomic<Int>(0)
        let turns = Atomic<Int>(0)
        let waits = Atomic<Int>(0)
        let finishes = Atomic<Int>(0)
        /// A task waits for the source's next byte (set on the thread, by the job that waits).
        let awaiting = Atomic<Bool>(false)
        var turnThreads: Set<String> = []
        var waiter: CheckedContinuation<UInt8, Never>?

        init() {
            var a: [Int32] = [0, 0]
            var b: [Int32] = [0, 0]
            pipe(&a)
            pipe(&b)
            (wakeFDs, sourceFDs) = (a, b)
            for fd in [a[0], b[0]] { _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) }
        }

        deinit { for fd in wakeFDs + sourceFDs { close(fd) } }

        func turn() {
            turns.add(1, ordering: .relaxed)
            turnThreads.insert(ProcessThreads.current())
            var byte: UInt8 = 0
            while read(wakeFDs[0], &byte, 1) == 1 {}
            if waiter != nil, read(sourceFDs[0], &byte, 1) == 1 {
                waiter?.resume(returning: byte)
                waiter = nil
            }
        }

        func wait() {
            waits.add(1, ordering: .relaxed)
            var fds = [pollfd(fd: wakeFDs[0], events: Int16(POLLIN), revents: 0)]
            if waiter != nil { fds.append(pollfd(fd: sourceFDs[0], events: Int16(POLLIN), revents: 0)) }
            _ = poll(&fds, nfds_t(fds.count), 10_000)
        }

        func wake() {
            wakes.add(1, ordering: .relaxed)
            var byte: UInt8 = 1
            _ = write(wakeFDs[1], &byte, 1)
        }

        func finish() { finishes.add(1, ordering: .relaxed) }

        /// From a job on the thread: waits for the next byte on the source.
        func next() async -> UInt8 {
            await withCheckedContinuation {
                waiter = $0
                awaiting.store(true, ordering: .relaxed)
            }
        }
    }

    @Test func aJobFromAnotherThreadWakesTheLoopAndOnesFromTheThreadItselfDoNot() async {
        let loop = PipeLoop()
        let executor = ThreadExecutor(name: "test-looped", loop: loop)
        defer { executor.shutdown() }
        #expect(await eventually(.seconds(5)) { loop.waits.load(ordering: .relaxed) > 0 }, "the idle thread waits")
        let first = await withTaskExecutorPreference(executor) { ProcessThreads.current() }
        #expect(first == "test-looped")
        #expect(loop.wakes.load(ordering: .relaxed) >= 1, "the sleeping thread was woken for the job")
        let (names, wakes) = await withTaskExecutorPreference(executor) { () async -> ([String], Int) in
            let before = loop.wakes.load(ordering: .relaxed)
            var names: Set<String> = []
            for _ in 0..<50 {
                // The task queues itself again on its executor: a job the thread queues for the thread.
                await Task.yield()
                names.insert(ProcessThreads.current())
            }
            return (Array(names), loop.wakes.load(ordering: .relaxed) - before)
        }
        #expect(names == ["test-looped"])
        #expect(wakes == 0, "a job the thread queues for itself needs no wake-up")
    }

    @Test func theLoopsEventsAreHandledOnTheThreadAndResumeItsTasksThere() async {
        let loop = PipeLoop()
        let executor = ThreadExecutor(name: "test-events", loop: loop)
        defer { executor.shutdown() }
        let task = Task(executorPreference: executor) { () async -> (UInt8, String) in
            let byte = await loop.next()
            return (byte, ProcessThreads.current())
        }
        // Written once the task waits, from the test's thread: only the loop's own turn or poll can see it.
        #expect(await eventually { loop.awaiting.load(ordering: .relaxed) })
        let wakesBefore = loop.wakes.load(ordering: .relaxed)
        var sent: UInt8 = 42
        _ = write(loop.sourceFDs[1], &sent, 1)
        let (byte, name) = await task.value
        #expect(byte == 42)
        #expect(name == "test-events")
        #expect(loop.wakes.load(ordering: .relaxed) == wakesBefore, "the source's byte woke the poll, not a wake()")
        executor.shutdown()
        #expect(loop.turnThreads == ["test-events"])
    }

    @Test func theShutdownRunsTheQueuedJobsThenFinishesTheLoopOnce() async {
        let loop = PipeLoop()
        let executor = ThreadExecutor(name: "test-finish", loop: loop)
        final class Seen: Sendable {
            let ran = Atomic<Int>(0)
            let finishesBefore = Atomic<Int>(-1)
        }
        let seen = Seen()
        await withTaskExecutorPreference(executor) {
            for _ in 0..<10 {
                Task(executorPreference: executor) {
                    seen.ran.add(1, ordering: .relaxed)
                    seen.finishesBefore.store(loop.finishes.load(ordering: .relaxed), ordering: .relaxed)
                }
            }
        }
        executor.shutdown()
        #expect(seen.ran.load(ordering: .relaxed) == 10)
        #expect(seen.finishesBefore.load(ordering: .relaxed) == 0, "no job ran after the loop's finish")
        #expect(loop.finishes.load(ordering: .relaxed) == 1)
        executor.shutdown()
        #expect(loop.finishes.load(ordering: .relaxed) == 1)
    }
}
