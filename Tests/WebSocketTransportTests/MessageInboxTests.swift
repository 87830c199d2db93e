import Synchronization
import Testing

@testable import WebSocketTransport

/// The inbox between the service thread and the reader: it asks the service thread to stop reading the socket when
/// too many messages, or too many bytes, wait; and lets it read again once the reader has taken half.
@Suite struct MessageInboxTests {
    func message(_ size: Int) -> WebSocketMessage { .text([UInt8](repeating: 0x61, count: size)) }

    @Test func bigFramesPauseReadingByTheirBytesNotTheirCount() async throws {
        let inbox = MessageInbox(loop: nil, highWater: 4096, highWaterBytes: 300_000)
        #expect(inbox.push(message(100_000)) == false)
        #expect(inbox.push(message(100_000)) == false)
        #expect(inbox.push(message(100_000)) == true, "300,000 bytes wait: stop reading, though only 3 messages do")
        #expect(inbox.push(message(100_000)) == false, "asked once; what was already read is still kept")
        let resumed = ResumeCount()
        inbox.onResume { resumed.add() }
        _ = try await inbox.next()
        _ = try await inbox.next()
        #expect(resumed.count == 0, "200,000 bytes still wait: more than half")
        _ = try await inbox.next()
        #expect(resumed.count == 1, "100,000 bytes wait: reading resumes")
        #expect(try await inbox.next()?.count == 100_000, "nothing was lost")
    }

    @Test func takingTheBacklogAtOnceResumesReading() async throws {
        let inbox = MessageInbox(loop: nil, highWater: 4096, highWaterBytes: 1000)
        let resumed = ResumeCount()
        inbox.onResume { resumed.add() }
        for _ in 0..<3 { _ = inbox.push(message(400)) }
        #expect(try await inbox.nextBatch()?.count == 3)
        #expect(resumed.count == 1)
        #expect(inbox.push(message(400)) == false, "the byte count starts again from nothing")
    }

    /// A wait for the follower of an event that ends because the follower came leaves no timer to wake the loop
    /// later for nothing (at 20 transactions a second, one wasted round of the loop each).
    @Test func aTimedWaitEndedByAMessageTakesBackItsTimer() async throws {
        let loop = WebSocketLoop(name: "inbox-test")
        defer { loop.shutdown() }
        let inbox = MessageInbox(loop: loop)
        let reader = Task { try await inbox.nextBatch(within: .seconds(30))?.count }
        let deadline = ContinuousClock.now + .seconds(10)
        while loop.pendingTimers == 0 && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(5)) }
        #expect(loop.pendingTimers == 1, "the wait's timer")
        _ = inbox.push(message(10))
        #expect(try await reader.value == 1)
        #expect(loop.pendingTimers == 0, "taken back")
    }

    @Test func aTimedWaitWithNothingEndsEmptyOnTime() async throws {
        let loop = WebSocketLoop(name: "inbox-test")
        defer { loop.shutdown() }
        let inbox = MessageInbox(loop: loop)
        let started = ContinuousClock.now
        #expect(try await inbox.nextBatch(within: .milliseconds(50))?.isEmpty == true)
        #expect(ContinuousClock.now - started >= .milliseconds(50))
        #expect(loop.pendingTimers == 0)
        _ = inbox.push(message(10))
        #expect(try await inbox.nextBatch(within: .milliseconds(50))?.count == 1, "a later wait is not ended by it")
    }
}

final class ResumeCount: Sendable {
    private let n = Mutex(0)
    func add() { n.withLock { $0 += 1 } }
    var count: Int { n.withLock { $0 } }
}
