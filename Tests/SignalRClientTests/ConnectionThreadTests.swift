import Foundation
import HubSimulator
import SignalRClient
import SignalRProtocol
import Synchronization
import Testing
import WebSocketTransport

/// The name of the thread the caller runs on, as `top -H` shows it.
func currentThreadName() -> String {
    ((try? String(contentsOfFile: "/proc/thread-self/comm", encoding: .utf8)) ?? "?").trimmingCharacters(in: .whitespacesAndNewlines)
}

/// A frame is decoded on the thread that received it: the connection's loop, not a thread it wakes.
@Suite struct ConnectionThreadTests {
    @Test func framesAreDecodedOnTheLoopThreadThatReadThem() async throws {
        try await withSimulator { base in
            let threads = Mutex<[String: Int]>([:])
            let decoder = HubEventDecoder<Int>(
                targets: ["TransactionCreated", "BalanceUpdated"],
                read: { _, reader in
                    let name = currentThreadName()
                    threads.withLock { $0[name, default: 0] += 1 }
                    return reader.skipValue() ? 1 : nil
                },
                decode: { _, _ in 1 }, onError: { _, _ in })
            let connection = HubConnection(url: hubURL(base), options: options(), logger: quietLogger())
            let buffer = HubEventBuffer<Int>(capacity: 10_000)
            await connection.on(decoder, into: buffer)
            try await connection.start()
            let prepared = try await call(base, "POST", "/_sim/blast/prepare?count=500&batch=1")
            let expected = prepared["events"]?.intValue ?? 0
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
}

/// The loop is an executor: an actor on it runs on the loop's thread, and so do its timers.
@Suite struct WebSocketLoopTests {
    actor OnLoop {
        nonisolated let loop: WebSocketLoop
        nonisolated var unownedExecutor: UnownedSerialExecutor { loop.asUnownedSerialExecutor() }
        init(_ loop: WebSocketLoop) { self.loop = loop }
        func thread() -> String { currentThreadName() }
    }

    @Test func anActorOnTheLoopRunsOnItsThreadAndSoDoItsTimers() async throws {
        let loop = WebSocketLoop(name: "test-loop")
        defer { loop.shutdown() }
        let actor = OnLoop(loop)
        #expect(await actor.thread() == "test-loop")
        let began = ContinuousClock.now
        let fired: (String, Duration) = await withCheckedContinuation { c in
            loop.schedule(after: .milliseconds(50)) { c.resume(returning: (currentThreadName(), ContinuousClock.now - began)) }
        }
        #expect(fired.0 == "test-loop")
        #expect(fired.1 >= .milliseconds(50), "not before it is due: \(fired.1)")
    }
}
