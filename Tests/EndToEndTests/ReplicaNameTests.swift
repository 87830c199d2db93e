import Foundation
import TestSupport
import Testing

/// Replicas' names (`store.replica_name`): one relay per name at a time, the name being the replica's presence lock.
extension ReplicaTests {
    /// Two relays under one name would each take the other's claims for its own: the second is refused (exit 78, with
    /// what to set) after waiting for the name's earlier session to end, and the first runs on. A replica killed and
    /// started again under its name is not refused: the server ended the killed one's session at once.
    @Test func aSecondRelayUnderTheSameNameIsRefusedAndARestartIsNot() async throws {
        try await withReplicas(["a"], hook: WebhookReceiver()) { r in
            let twin = try RelayProcess(env: r.env(name: "a"), arguments: ["run", "--config", r.config])
            #expect(await twin.wait(limit: .seconds(60)) == 78, "\(twin.output.suffix(2000))")
            #expect(twin.output.contains("another relay runs as replica 'a'"), "\(twin.output.suffix(2000))")
            #expect(twin.output.contains("store.replica_name") && !twin.output.contains(r.cluster.password))
            #expect(!twin.output.contains("holds the hub link"), "the refused relay never took the link")
            _ = await r.relays[0].stop(signal: SIGKILL)
            let again = try RelayProcess(env: r.env(name: "a"), arguments: ["run", "--config", r.config])
            #expect(await again.waitFor("this replica holds the hub link"), "\(again.output.suffix(2000))")
            #expect(!again.output.contains("still up on the database"), "no wait for a killed run's session")
            await again.expectCleanStop()
        }
    }

    /// Two relays started at the same moment under one name (two containers given one host name): the name is the
    /// presence lock, taken before any other part of a relay starts, so one runs and the other is refused before it
    /// takes the link or sends; a burst then reaches the sink once per transaction.
    @Test func twoRelaysStartedTogetherUnderOneNameRunAsOne() async throws {
        let hook = WebhookReceiver()
        try await withReplicas(["a", "a"], hook: hook) { r in
            let (kept, refused) = (r.relays[r.holder], r.relays[1 - r.holder])
            #expect(await refused.wait(limit: .seconds(60)) == 78, "\(refused.output.suffix(2000))")
            #expect(refused.output.contains("another relay runs as replica 'a'"), "\(refused.output.suffix(2000))")
            #expect(kept.output.contains("replica a starting"))
            #expect(!refused.output.contains("replica a starting"), "refused before any part of it started")
            #expect(kept.isRunning)
            let before = try await r.serverIds()
            try await simPost(r.base, "/_sim/burst?count=10")
            let made = try await r.serverIds().subtracting(before)
            #expect(await eventually(.seconds(30)) { Set(hook.received.compactMap(Scenario.transactionId)) == made })
            let ids = hook.received.compactMap { $0.headers["webhook-id"] }
            #expect(ids.count == Set(ids).count && ids.count == made.count, "one webhook per transaction: \(ids)")
            await kept.expectCleanStop()
        }
    }

    /// Stopped while it waits for its name, a relay ends at once (exit 0) with nothing of it started: no part of a
    /// relay runs without its name.
    @Test func aRelayStoppedWhileWaitingForItsNameEndsWithNothingStarted() async throws {
        try await withReplicas(["a"], hook: WebhookReceiver()) { r in
            let twin = try RelayProcess(env: r.env(name: "a"), arguments: ["run", "--config", r.config])
            #expect(await twin.waitFor("is still up on the database"), "\(twin.output.suffix(2000))")
            await twin.expectCleanStop()
            #expect(!twin.output.contains("replica a starting"), "\(twin.output.suffix(2000))")
            await r.relays[0].expectCleanStop()
        }
    }
}
