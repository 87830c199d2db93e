import Foundation
import Synchronization
import TestSupport
import Testing

@testable import SignalRClient

/// A backend that comes back is noticed within seconds of a long back-off (a cheap probe of its origin), while a
/// backend that answers wrongly is retried no faster than the policy says.
@Suite struct ReachabilityTests {
    @Test func aProbeThatAnswersEndsThePauseAtItsAnswer() async {
        let asked = Atomic<Int>(0)
        let began = ContinuousClock.now
        await HubConnection.pause(
            .seconds(30), endedEarlyBy: { asked.add(1, ordering: .relaxed).newValue == 2 }, every: .milliseconds(50))
        #expect(asked.load(ordering: .relaxed) == 2, "asked until it said yes, then no more")
        #expect(ContinuousClock.now - began < .seconds(10), "ended by the probe, not the 30 s pause")
    }

    @Test func aProbeThatNeverAnswersLeavesThePauseWhole() async {
        let asked = Atomic<Int>(0)
        let began = ContinuousClock.now
        // 350 ms at 100 ms: asked at 100 and 200; at 300 less than one interval is left, so no more. (On a starved
        // machine an ask comes late, and the one after it may find less than an interval left: one ask, not two.)
        await HubConnection.pause(
            .milliseconds(350),
            endedEarlyBy: {
                asked.add(1, ordering: .relaxed)
                return false
            }, every: .milliseconds(100))
        #expect((1...2).contains(asked.load(ordering: .relaxed)), "asked \(asked.load(ordering: .relaxed)) times")
        #expect(ContinuousClock.now - began >= .milliseconds(350))
    }

    /// The start's policy pauses 60 s after the first failure; the hub comes up 1 s later and the start ends within
    /// a few seconds (a probe every 3 s), not after the minute.
    @Test func aServerThatComesBackIsNoticedWithinSecondsOfALongPause() async throws {
        let port = try freeLoopbackPortOutsideEphemeralRange()  // nobody listens yet
        var o = options()
        o.startRetryPolicy = FixedPause(.seconds(60))
        let connection = HubConnection(
            url: URL(string: "http://127.0.0.1:\(port)/hubs/family")!, options: o, logger: quietLogger())
        let starting = Task { try await connection.start() }
        try await Task.sleep(for: .seconds(1))
        try await withSimulator({ $0.port = port }) { _ in
            let up = ContinuousClock.now
            try await starting.value
            #expect(ContinuousClock.now - up < .seconds(10), "noticed by a probe, not after the 60 s pause")
            #expect(await connection.state == .connected)
            await connection.stop()
        }
    }

    /// A server that answers (here 503 to everything) is not probed: nothing but the first attempt reaches it during
    /// the policy's pause.
    @Test func aServerThatAnswersWronglyIsNotRetriedFasterThanThePolicy() async throws {
        let receiver = WebhookReceiver { _, _ in .init(503, body: "down for maintenance") }
        try await receiver.run { base in
            var o = options()
            o.startRetryPolicy = FixedPause(.seconds(60))
            let connection = HubConnection(url: base.appending(path: "hubs/family"), options: o, logger: quietLogger())
            let starting = Task { try await connection.start() }
            try await Task.sleep(for: .seconds(7))  // two probe intervals and more
            #expect(receiver.received.count == 1, "the first negotiate only: \(receiver.received.map(\.path))")
            await connection.stop()
            _ = try? await starting.value
        }
    }
}

/// Retries for ever, each after the same pause.
private struct FixedPause: RetryPolicy {
    let pause: Duration
    init(_ pause: Duration) { self.pause = pause }
    func nextRetryDelay(_ context: RetryContext) -> Duration? { pause }
}
