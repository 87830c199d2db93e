import Foundation
import HubSimulator
import SignalRClient
import SignalRProtocol
import Synchronization
import TestSupport
import Testing
import WebSocketTransport

/// A frame is decoded on the thread that received it: the connection's loop, not a thread it wakes. A consumer that
/// prefers the connection's executor is resumed by that thread too, so no other thread is woken for it.
@Suite struct ConnectionThreadTests {
    /// A started connection whose events (`read` decodes each to 1) go to the returned buffer, and a blast of `count`
    /// transactions prepared at the simulator, one message a frame: the number of events it will send.
    func connectionWithBlast(
        _ base: URL, count: Int, read: @escaping @Sendable (String, inout JSONReader) -> Int?
    ) async throws -> (HubConnection, HubEventBuffer<Int>, expected: Int) {
        let decoder = HubEventDecoder<Int>(
            targets: ["TransactionCreated", "BalanceUpdated"], read: read, decode: { _, _ in 1 }, onError: { _, _ in })
        let connection = HubConnection(url: hubURL(base), options: options(), logger: quietLogger())
        let buffer = HubEventBuffer<Int>(capacity: 10_000)
        await connection.on(decoder, into: buffer)
        try await connection.start()
        let prepared = try await call(base, "POST", "/_sim/blast/prepare?count=\(count)&batch=1")
        return (connection, buffer, prepared["events"]?.intValue ?? 0)
    }

    @Test func framesAreDecodedOnTheLoopThreadThatReadThem() async throws {
        try await withSimulator { base in
            let threads = Mutex<[String: Int]>([:])
            let (connection, buffer, expected) = try await connectionWithBlast(base, count: 500) { _, reader in
                let name = ProcessThreads.current()
                threads.withLock { $0[name, default: 0] += 1 }
                return reader.skipValue() ? 1 : nil
            }
            _ = try await call(base, "POST", "/_sim/blast/go")
            var received = 0
            let deadline = ContinuousClock.now + .seconds(20)
            while received < expected, ContinuousClock.now < deadline {
                received += await buffer.next(limit: 1000, within: .milliseconds(100))?.count ?? 0
            }
            await connection.stop()
            #expect(received == expected)
            let seen = threads.withLock { $0 }
            #expect(seen == ["signalr-\(base.port!)": expected], "decoded on: \(seen)")
        }
    }

    @Test func aConsumerThatPrefersTheConnectionRunsOnItsThread() async throws {
        try await withSimulator { base in
            let (connection, buffer, expected) = try await connectionWithBlast(base, count: 300) { _, reader in
                reader.skipValue() ? 1 : nil
            }
            let consumer = Task(executorPreference: connection.taskExecutor) { () async -> (Int, [String: Int]) in
                var received = 0
                var threads: [String: Int] = [:]
                let deadline = ContinuousClock.now + .seconds(20)
                while received < expected, ContinuousClock.now < deadline {
                    let batch = await buffer.next(limit: 1000, within: .milliseconds(100)) ?? []
                    if !batch.isEmpty { threads[ProcessThreads.current(), default: 0] += 1 }
                    received += batch.count
                }
                return (received, threads)
            }
            _ = try await call(base, "POST", "/_sim/blast/go")
            let (received, threads) = await consumer.value
            await connection.stop()
            #expect(received == expected)
            #expect(Set(threads.keys) == ["signalr-\(base.port!)"], "hand-overs taken on: \(threads)")
        }
    }
}

/// The loop is an executor: an actor on it runs on the loop's thread, and so do its timers.
@Suite struct WebSocketLoopTests {
    actor OnLoop {
        nonisolated let loop: WebSocketLoop
        nonisolated var unownedExecutor: UnownedSerialExecutor { loop.asUnownedSerialExecutor() }
        init(_ loop: WebSocketLoop) { self.loop = loop }
        func thread() -> String { ProcessThreads.current() }
    }

    @Test func anActorOnTheLoopRunsOnItsThreadAndSoDoItsTimers() async throws {
        let loop = WebSocketLoop(name: "test-loop")
        defer { loop.shutdown() }
        let actor = OnLoop(loop)
        #expect(await actor.thread() == "test-loop")
        let began = ContinuousClock.now
        let fired: (String, Duration) = await withCheckedContinuation { c in
            loop.schedule(after: .milliseconds(50)) {
                c.resume(returning: (ProcessThreads.current(), ContinuousClock.now - began))
            }
        }
        #expect(fired.0 == "test-loop")
        #expect(fired.1 >= .milliseconds(50), "not before it is due: \(fired.1)")
    }

    /// A task that prefers the loop starts there, and a continuation resumed on another thread resumes it there.
    @Test func aTaskThatPrefersTheLoopIsResumedOnItsThread() async throws {
        let loop = WebSocketLoop(name: "prefer-loop")
        defer { loop.shutdown() }
        let threads = await Task(executorPreference: loop.taskExecutor) { () async -> [String] in
            let first = ProcessThreads.current()
            await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
                Thread { c.resume() }.start()
            }
            return [first, ProcessThreads.current()]
        }.value
        #expect(threads == ["prefer-loop", "prefer-loop"])
    }

    /// Once the loop's thread has ended, a task that still prefers it runs on the global pool: it is not left in a
    /// queue that no thread reads (as a reader woken by a connection the ending loop abandons would be).
    @Test func aTaskThatPrefersAnEndedLoopStillRuns() async throws {
        let loop = WebSocketLoop(name: "ended-loop")
        let actor = OnLoop(loop)
        #expect(await actor.thread() == "ended-loop")  // the thread runs
        loop.shutdown()
        let deadline = ContinuousClock.now + .seconds(10)
        while ProcessThreads.names().contains("ended-loop"), ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(5))
        }
        #expect(!ProcessThreads.names().contains("ended-loop"), "the loop's thread ends")
        let ran = Atomic<Bool>(false)
        let task = Task(executorPreference: loop.taskExecutor) { () -> String in
            ran.store(true, ordering: .releasing)
            return ProcessThreads.current()
        }
        while !ran.load(ordering: .acquiring), ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(5))
        }
        let didRun = ran.load(ordering: .acquiring)
        #expect(didRun, "the task ran")
        if didRun { #expect(await task.value != "ended-loop") }
    }
}

/// An event the server follows at once (a transaction, then its balance, in the next frame) is held for the follower:
/// the pair reaches the consumer in one hand-over, and a held event whose follower does not come goes when the wait
/// ends, without waiting for another frame.
@Suite struct FollowerHoldTests {
    func decoder(followed: String, wait: Duration) -> HubEventDecoder<String> {
        HubEventDecoder(
            targets: ["TransactionCreated", "BalanceUpdated"],
            read: { target, reader in reader.skipValue() ? target : nil },
            decode: { target, _ in target }, onError: { _, _ in }, isFollowed: { $0 == followed }, followerWait: wait)
    }

    /// The consumer waits for each hand-over as the store writer does; every one holds whole pairs.
    @Test func aTransactionAndItsBalanceInTwoFramesAreOneHandOver() async throws {
        try await withSimulator { base in
            let connection = HubConnection(url: hubURL(base), options: options(), logger: quietLogger())
            let buffer = HubEventBuffer<String>()
            await connection.on(decoder(followed: "TransactionCreated", wait: .seconds(5)), into: buffer)
            try await connection.start()
            let paced = Task { try await call(base, "POST", "/_sim/paced?count=10&rate=20") }
            var batches: [[String]] = []
            while batches.joined().count < 20, let batch = await buffer.next() { batches.append(batch) }
            _ = try await paced.value
            await connection.stop()
            #expect(batches.joined().count == 20)
            for batch in batches {
                #expect(
                    batch.count % 2 == 0
                        && batch.indices.allSatisfy {
                            batch[$0] == ($0 % 2 == 0 ? "TransactionCreated" : "BalanceUpdated")
                        },
                    "a hand-over split a pair: \(batches)")
            }
        }
    }

    /// Here the balance is the "followed" event: each pair's balance is held, and the last one has no follower.
    @Test func aHeldEventWhoseFollowerDoesNotComeGoesWhenTheWaitEnds() async throws {
        try await withSimulator { base in
            let connection = HubConnection(url: hubURL(base), options: options(), logger: quietLogger())
            let buffer = HubEventBuffer<String>()
            await connection.on(decoder(followed: "BalanceUpdated", wait: .milliseconds(100)), into: buffer)
            try await connection.start()
            _ = try await call(base, "POST", "/_sim/paced?count=3&rate=5")
            var received: [String] = []
            let deadline = ContinuousClock.now + .seconds(5)  // the hub's next frame (a ping) is 15 s away
            while received.count < 6, ContinuousClock.now < deadline {
                received += await buffer.next(within: .milliseconds(200)) ?? []
            }
            await connection.stop()
            #expect(received.count == 6, "the last balance, held for a follower that never came, arrived: \(received)")
        }
    }
}
