import AllowanceAPI
import Foundation
import Store
import TestSupport
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Faults around the relay's own machine, with the real binary and the simulator.
@Suite(.serialized, .timeLimit(.minutes(2))) struct FaultTests {
    @Test func aDatabaseLockedByAnotherProgramIsNamedAndNothingIsLostOnceItIsFree() async throws {
        try #require(PythonPeer.available)
        try await withSim { base in
            let dir = FileManager.default.temporaryDirectory.appending(path: "relay-lock-\(UUID())")
            try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
            let db = dir.appending(path: "relay.sqlite").path
            let relay = try RelayProcess(env: [
                "ALLOWANCE_RELAY_SERVER_URL": base.absoluteString, "ALLOWANCE_RELAY_SERVER_TOKEN": "e2e-token",
                "ALLOWANCE_RELAY_STORE_PATH": db,
            ])
            #expect(await relay.waitFor("caught up"))
            // Another program holds the write lock for 8 s, longer than the relay's 5 s busy timeout.
            let holder = try await PythonPeer(script: "hold_lock.py", arguments: [db, "8"])
            defer { holder.stop() }
            try await simPost(base, "/_sim/burst?count=5")
            #expect(
                await relay.waitFor(
                    "The database is locked by another process for more than 5 s", timeout: .seconds(20)))
            #expect(relay.output.contains(db), "the message names the file")
            // Once the lock is gone, the catch-up the failure asked for stores what the hub had sent.
            let server = try await ServerTruth.transactions(base).count
            let stored = await eventually(.seconds(60)) {
                (try? Store.open(path: db).summary().transactions) == server
            }
            #expect(stored, "\(relay.output.suffix(2000))")
            await relay.expectCleanStop("still running, and stops cleanly")
        }
    }

    /// Two relays started on one SQLite file: the second waits as a standby rather than send from the same ledger
    /// (its webhooks would double every alert); when the first is killed it takes over, and every transaction the
    /// server made is delivered, each under one webhook-id; a send the kill cut short before its outcome was written
    /// goes again, under the same id.
    @Test func aSecondRelayOnTheSameFileStandsByAndTakesOverWhenTheFirstDies() async throws {
        let hook = WebhookReceiver()
        try await hook.run { hookURL in
            try await withSim { base in
                let config = try Scenario.writeConfig(hook: hookURL)
                let db = FileManager.default.temporaryDirectory.appending(path: "relay-standby-\(UUID())/relay.sqlite")
                    .path
                let env = [
                    "ALLOWANCE_RELAY_SERVER_URL": base.absoluteString, "ALLOWANCE_RELAY_SERVER_TOKEN": "e2e-token",
                    "ALLOWANCE_RELAY_STORE_PATH": db,
                ]
                let first = try RelayProcess(env: env, arguments: ["run", "--config", config])
                #expect(await first.waitFor("caught up"))
                let second = try RelayProcess(env: env, arguments: ["run", "--config", config])
                #expect(await second.waitFor("waiting as a standby"), "\(second.output.suffix(2000))")
                // The standby sleeps until the first ends: no try each second, on any of its threads.
                let asleep = ProcessThreads.allSleeps(of: second.pid)
                try await Task.sleep(for: .seconds(3))
                let woke = ProcessThreads.allSleeps(of: second.pid) - asleep
                #expect(woke <= 2, "the standby woke \(woke) times in 3 s: \(ProcessThreads.sleeps(of: second.pid))")
                let before = Set(try await ServerTruth.transactions(base).map { $0.id.uuidString.lowercased() })
                try await simPost(base, "/_sim/burst?count=10")
                let firstBurst = Set(try await ServerTruth.transactions(base).map { $0.id.uuidString.lowercased() })
                    .subtracting(before)
                #expect(
                    await eventually(.seconds(20)) {
                        Set(hook.received.compactMap(Scenario.transactionId)) == firstBurst
                    })
                #expect(!second.output.contains("connected to the hub"), "the standby holds no hub link")
                _ = await first.stop(signal: SIGKILL)
                #expect(await second.waitFor("taking over"), "\(second.output.suffix(2000))")
                #expect(await second.waitFor("caught up"))
                try await simPost(base, "/_sim/burst?count=10")
                let made = Set(try await ServerTruth.transactions(base).map { $0.id.uuidString.lowercased() })
                    .subtracting(before)
                #expect(
                    await eventually(.seconds(30)) { Set(hook.received.compactMap(Scenario.transactionId)) == made })
                // The promise (RELIABILITY.md): a send whose outcome the kill cut short goes again under its own
                // webhook-id, so at most the sink's concurrency (4) repeats, all from the burst the first relay sent,
                // and no transaction under two ids.
                var idsOfTransaction: [String: Set<String>] = [:]
                var sends: [String: Int] = [:]
                for request in hook.received {
                    guard let txn = Scenario.transactionId(of: request), let id = request.headers["webhook-id"]
                    else { continue }
                    idsOfTransaction[txn, default: []].insert(id)
                    sends[txn, default: 0] += 1
                }
                #expect(idsOfTransaction.values.allSatisfy { $0.count == 1 }, "one webhook-id per transaction")
                let repeated = Set(sends.filter { $0.value > 1 }.keys)
                #expect(repeated.isSubset(of: firstBurst), "only sends the kill cut short go again")
                #expect(
                    sends.values.reduce(0) { $0 + $1 - 1 } <= 4,
                    "at most the sink's concurrency repeats for the one kill: \(sends.filter { $0.value > 1 })")
                await second.expectCleanStop()
            }
        }
    }
}
