import AllowanceAPI
import Foundation
import HubSimulator
import Store
import TestSupport
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// `kill -9` at random moments, repeated: nothing the server holds is missing or doubled afterwards.
/// The moments come from a seeded generator (ALLOWANCE_TEST_SEED to replay a failure; the seed is printed).
@Suite(.serialized, .timeLimit(.minutes(3))) struct CrashTests {
    private let seed = testSeed

    @Test func killedAtRandomDuringBurstsTheCacheEndsEqualToTheServer() async throws {
        var random = SeededRandom(seed: seed)
        try await withSim { base in
            let env = relayEnv(base)
            var bursts: [Task<Void, any Error>] = []
            for round in 1...6 {
                let relay = try RelayProcess(env: env)
                #expect(await relay.waitFor("connected to the hub"))
                bursts.append(Task { try await simPost(base, "/_sim/burst?count=150") })
                let delay = Int(random.next() % 400)
                try await Task.sleep(for: .milliseconds(delay))
                _ = await relay.stop(signal: SIGKILL)
                print("crash test (seed \(seed)): round \(round) killed after \(delay) ms")
            }
            for b in bursts { try await b.value }
            try await finalRunAndCompare(base, env, "kill -9 at random moments during event bursts, 6 times", kills: 6)
        }
    }

    /// The hub's own process killed (`kill -9` of allowance-hub-sim, which keeps its family in a state file) in the
    /// middle of bursts and started again on the same port: every transaction the server kept is cached once, with
    /// the server's balances, and alerted. Unlike the simulated outage of ReliabilityTests, nothing of the process
    /// survives: its connections, connection tokens and unsent broadcasts are gone.
    @Test func theHubsProcessKilledMidBurstAndRestartedLosesNothing() async throws {
        var random = SeededRandom(seed: seed &+ 2)
        let hook = WebhookReceiver()
        try await hook.run { hookURL in
            let sim = try await SimulatorProcess(token: "e2e-token")
            defer { sim.stop() }
            let s = try await Scenario(base: sim.base, hook: hookURL)
            let relay = try await s.startCaughtUp()
            for round in 1...3 {
                let burst = Task { try? await simPost(sim.base, "/_sim/burst?count=300&ms=4") }  // about 1.5 s
                let delay = 100 + Int(random.next() % 900)
                try await Task.sleep(for: .milliseconds(delay))
                let before = try await simStats(sim.base)["transactions"] ?? 0
                sim.crash()
                _ = await burst.value  // cut short with the process
                try await sim.start()
                let kept = try await simStats(sim.base)["transactions"] ?? 0
                print(
                    "crash test (seed \(seed &+ 2)): hub killed \(round) after \(delay) ms, \(kept) transactions kept")
                #expect(kept >= before, "the restarted hub is the same backend (its state file)")
                #expect(await relay.waitFor(count: round + 1, of: "connected to the hub", timeout: .seconds(60)))
            }
            try await simPost(sim.base, "/_sim/burst?count=20")
            try await s.expectNothingLost(
                hook, "the hub's process killed (kill -9) mid-burst and restarted, 3 times", extra: [("hub kills", 3)],
                relay: relay)
            await relay.expectCleanStop()
        }
    }

    @Test func killedAtRandomDuringAnOutboxDrainEachWriteReachesTheServerOnce() async throws {
        var random = SeededRandom(seed: seed &+ 1)
        try await withSim { base in
            let env = relayEnv(base)
            let first = try RelayProcess(env: env)
            #expect(await first.waitFor("caught up"))
            await first.expectCleanStop()
            // 60 writes made offline (the same Store call as `allowance-relay transaction add`).
            let store = try Store.open(path: env["ALLOWANCE_RELAY_STORE_PATH"]!)
            let kids = try store.children()
            for i in 0..<60 {
                _ = try store.enqueueTransaction(
                    child: kids[i % kids.count].id, amount: 1, type: .credit, description: "crash-write-\(i)")
            }
            // Each REST answer takes 40 ms, so that kills land mid-drain.
            try await simPost(base, "/_sim/rest?mode=slow&ms=40&count=100000")
            var round = 0
            while try store.summary().outboxWaiting > 0, round < 12 {
                round += 1
                let relay = try RelayProcess(env: env)
                // Generous: under AddressSanitizer with the suite in parallel a start took 15 s.
                #expect(await relay.waitFor("connected to the hub", timeout: .seconds(45)))
                let delay = Int(random.next() % 1500)
                try await Task.sleep(for: .milliseconds(delay))
                _ = await relay.stop(signal: SIGKILL)
                print(
                    "crash test (seed \(seed &+ 1)): drain round \(round) killed after \(delay) ms, \(try store.summary().outboxWaiting) waiting"
                )
            }
            try await finalRunAndCompare(
                base, env, "kill -9 at random moments during an outbox drain of 60 writes", kills: round)
            #expect(try store.summary().outboxWaiting == 0)
            let descriptions = try await ServerTruth.transactions(base).map(\.description).filter {
                $0.hasPrefix("crash-write-")
            }
            #expect(descriptions.count == 60, "each write once: \(descriptions.count) on the server")
            #expect(Set(descriptions).count == 60)
        }
    }

    private func relayEnv(_ base: URL) -> [String: String] {
        [
            "ALLOWANCE_RELAY_SERVER_URL": base.absoluteString, "ALLOWANCE_RELAY_SERVER_TOKEN": "e2e-token",
            "ALLOWANCE_RELAY_STORE_PATH": FileManager.default.temporaryDirectory.appending(
                path: "relay-crash-\(UUID())/relay.sqlite"
            ).path,
        ]
    }

    /// One clean run to the idle state, then: the cache holds exactly the server's transactions and balances.
    private func finalRunAndCompare(_ base: URL, _ env: [String: String], _ scenario: String, kills: Int) async throws {
        let relay = try RelayProcess(env: env)
        #expect(await relay.waitFor("sync: syncing -> idle", timeout: .seconds(60)), "seed \(seed)")
        await relay.expectCleanStop()
        let store = try Store.open(path: env["ALLOWANCE_RELAY_STORE_PATH"]!)
        let server = try await ServerTruth.transactions(base)
        let cached = try store.transactions(limit: 100_000)
        #expect(
            Set(cached.map(\.id)) == Set(server.map(\.id)),
            "seed \(seed): cached \(cached.count), server \(server.count)")
        #expect(cached.count == server.count, "no duplicates")
        var wrongBalances = 0
        for c in try await ServerTruth.children(base)
        where try store.children().first(where: { $0.id == c.id })?.currentBalance != c.currentBalance {
            wrongBalances += 1
        }
        #expect(wrongBalances == 0, "seed \(seed)")
        let lost = Set(server.map(\.id)).subtracting(cached.map(\.id)).count
        ReliabilityFigures.record(
            scenario,
            [
                ("kills", kills), ("events", server.count), ("lost_events", lost), ("wrong_balances", wrongBalances),
                ("extra_events", cached.count - server.count),
            ])
    }
}
