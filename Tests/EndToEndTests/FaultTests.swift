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
            let server = try await Scenario.serverTransactions(base).count
            let stored = await eventually(.seconds(60)) {
                (try? Store.open(path: db).summary().transactions) == server
            }
            #expect(stored, "\(relay.output.suffix(2000))")
            await relay.expectCleanStop("still running, and stops cleanly")
        }
    }
}
