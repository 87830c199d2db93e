import AllowanceAPI
import Core
import Foundation
import SignalRProtocol
import Store
import Synchronization
import TestSupport
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The built `allowance-relay` binary, next to this test bundle.
let relayBinaryPath = builtProgram("allowance-relay")

/// The whole program, as a user runs it, against the real simulator.
@Suite(.serialized, .timeLimit(.minutes(2))) struct RelayEndToEndTests {
    @Test func logsEachHubEventAndStopsCleanlyOnSIGTERM() async throws {
        try await withSim { base in
            let relay = try RelayProcess(env: [
                "ALLOWANCE_RELAY_SERVER_URL": base.absoluteString, "ALLOWANCE_RELAY_SERVER_TOKEN": "e2e-token",
                "ALLOWANCE_RELAY_LOG_FORMAT": "json",
            ])
            #expect(await relay.waitFor("connected to the hub"))
            var request = URLRequest(
                url: base.appending(path: "_sim/burst").appending(queryItems: [.init(name: "count", value: "3")]))
            request.httpMethod = "POST"
            _ = try await TestHTTP.data(for: request)
            #expect(await relay.waitFor(count: 3, of: "\"event\":\"TransactionCreated\""))
            #expect(await relay.waitFor(count: 3, of: "\"event\":\"BalanceUpdated\""))
            #expect(!relay.output.contains("e2e-token"), "the token never reaches the logs")
            await relay.expectCleanStop()
            #expect(relay.output.contains("received SIGTERM"))
        }
    }

    /// A service manager may stop the relay right after starting it. SIGTERM is caught from the first thing `run`
    /// does, before the config is read and the database opened; one that comes then is kept, and the daemon stops
    /// gracefully as soon as it exists (exit 0, the database checkpointed) instead of dying of the signal.
    @Test func aSIGTERMWhileStartingIsAGracefulStop() async throws {
        try await withSim { base in
            let relay = try RelayProcess(env: [
                "ALLOWANCE_RELAY_SERVER_URL": base.absoluteString, "ALLOWANCE_RELAY_SERVER_TOKEN": "e2e-token",
            ])
            #expect(await relay.waitUntilCatching(SIGTERM))
            let startedBefore = relay.output.contains("starting")
            #expect(await relay.stop(signal: SIGTERM) == 0, "\(relay.output)")
            #expect(relay.output.contains("received SIGTERM, stopping gracefully"))
            #expect(relay.output.contains("stopped"))
            print("SIGTERM while starting: the daemon had \(startedBefore ? "already" : "not yet") logged 'starting'")
        }
    }

    @Test func refusedTokenExits77WithAClearMessage() async throws {
        try await withSim { base in
            let relay = try RelayProcess(env: [
                "ALLOWANCE_RELAY_SERVER_URL": base.absoluteString, "ALLOWANCE_RELAY_SERVER_TOKEN": "wrong-token",
            ])
            #expect(await relay.wait() == 77)
            #expect(relay.output.contains("refused the access token"))
            #expect(!relay.output.contains("wrong-token"))
        }
    }

    /// The same token refused at a reconnect ends the daemon as it does at start (exit 77, which the units do not
    /// restart), rather than knocking on the hub forever with it.
    @Test func aTokenRefusedAtAReconnectExits77AsAtStart() async throws {
        try await withSim { base in
            let relay = try RelayProcess(env: [
                "ALLOWANCE_RELAY_SERVER_URL": base.absoluteString, "ALLOWANCE_RELAY_SERVER_TOKEN": "e2e-token",
            ])
            #expect(await relay.waitFor("connected to the hub"))
            try await simPost(base, "/_sim/revoke?static=true")
            try await simPost(base, "/_sim/drop")
            #expect(await relay.wait() == 77)
            #expect(relay.output.contains("refused the token at a reconnect"))
            #expect(!relay.output.contains("e2e-token"))
        }
    }

    @Test func signsInWithEmailAndPasswordAndAgainWhenTheServerRevokesTheToken() async throws {
        try await withSim { base in
            let dir = FileManager.default.temporaryDirectory.appending(path: "relay-login-\(UUID())")
            try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
            let passwordFile = dir.appending(path: "password").path
            try "allowance\n".write(toFile: passwordFile, atomically: true, encoding: .utf8)
            chmod(passwordFile, 0o600)
            let relay = try RelayProcess(env: [
                "ALLOWANCE_RELAY_SERVER_URL": base.absoluteString,
                "ALLOWANCE_RELAY_SERVER_EMAIL": "parent@example.com",
                "ALLOWANCE_RELAY_SERVER_PASSWORD_FILE": passwordFile,
            ])
            #expect(await relay.waitFor("caught up"))
            try await simPost(base, "/_sim/revoke")
            try await simPost(base, "/_sim/drop")
            #expect(await relay.waitFor(count: 2, of: "connected to the hub"))
            #expect(await relay.waitFor(count: 2, of: "caught up"))
            #expect(try await simStats(base)["logins"] == 2, "one login at start, one after the revocation")
            await relay.expectCleanStop()
            #expect(!relay.output.contains("sim-"), "login tokens never reach the logs")
        }
    }

    @Test func afterAKill9AndARestartEverythingMissedIsCaughtUp() async throws {
        try await withSim { base in
            let storePath = FileManager.default.temporaryDirectory.appending(path: "relay-kill-\(UUID())/relay.sqlite")
                .path
            let env = [
                "ALLOWANCE_RELAY_SERVER_URL": base.absoluteString, "ALLOWANCE_RELAY_SERVER_TOKEN": "e2e-token",
                "ALLOWANCE_RELAY_STORE_PATH": storePath,
            ]
            let first = try RelayProcess(env: env)
            #expect(await first.waitFor("connected to the hub"))
            try await simPost(base, "/_sim/burst?count=5")
            #expect(await first.waitFor(count: 5, of: "TransactionCreated child="))
            _ = await first.stop(signal: SIGKILL)
            try await simPost(base, "/_sim/burst?count=1000")  // while the relay is down
            let second = try RelayProcess(env: env)
            // 1,000, or 1,001 if the kill landed between logging the 5th live event and storing it.
            #expect(await second.waitFor("caught up"))
            await second.expectCleanStop()

            let store = try Store.open(path: storePath)
            let stored = try store.transactions(limit: 5000).count
            #expect(
                stored == 1005,
                "stored \(stored); first run:\n\(first.output.suffix(3000))\nsecond run:\n\(second.output.suffix(3000))"
            )
            let server = try await APIClient(baseURL: base, token: "e2e-token").children()
            for c in server {
                #expect(try store.children().first { $0.id == c.id }?.currentBalance == c.currentBalance)
            }
        }
    }

    @Test func aCorruptDatabaseExits74NamingTheFixAndRebuildRecovers() async throws {
        try await withSim { base in
            let dir = FileManager.default.temporaryDirectory.appending(path: "relay-corrupt-\(UUID())")
            try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
            let storePath = dir.appending(path: "relay.sqlite").path
            try Data(repeating: 0x42, count: 8192).write(to: URL(fileURLWithPath: storePath))
            let env = [
                "ALLOWANCE_RELAY_SERVER_URL": base.absoluteString, "ALLOWANCE_RELAY_SERVER_TOKEN": "e2e-token",
                "ALLOWANCE_RELAY_STORE_PATH": storePath,
            ]
            let broken = try RelayProcess(env: env)
            #expect(await broken.wait() == 74)
            #expect(broken.output.contains(storePath) && broken.output.contains("--rebuild"))
            let rebuilt = try RelayProcess(env: env, arguments: ["run", "--rebuild"])
            #expect(await rebuilt.waitFor("moved the old database aside"))
            #expect(await rebuilt.waitFor("caught up"))
            await rebuilt.expectCleanStop()
        }
    }

    @Test func aDamagedPageFoundAfterTheStartIsReportedWithTheFix() async throws {
        try await withSim { base in
            let storePath = FileManager.default.temporaryDirectory.appending(
                path: "relay-damaged-\(UUID())/relay.sqlite"
            ).path
            let env = [
                "ALLOWANCE_RELAY_SERVER_URL": base.absoluteString, "ALLOWANCE_RELAY_SERVER_TOKEN": "e2e-token",
                "ALLOWANCE_RELAY_STORE_PATH": storePath,
            ]
            let first = try RelayProcess(env: env)
            #expect(await first.waitFor("caught up"))
            try await simPost(base, "/_sim/burst?count=1500")
            #expect(await first.waitFor(count: 1500, of: "TransactionCreated", timeout: .seconds(60)))
            await first.expectCleanStop()
            #expect(!first.output.contains("integrity"), "a sound file passes quietly")
            let file = try #require(FileHandle(forUpdatingAtPath: storePath))
            let size = try file.seekToEnd()
            try file.seek(toOffset: size / 2 / 4096 * 4096 + 8)
            try file.write(contentsOf: Data(repeating: 0x42, count: 4000))
            try file.close()
            // It starts (the check no longer holds the start up), then says what is wrong and what to do.
            let second = try RelayProcess(env: env)
            #expect(await second.waitFor("failed its integrity check"))
            #expect(second.output.contains("allowance-relay run --rebuild"))
            await second.expectCleanStop()
        }
    }

    @Test func theCacheCommandsReadTheDatabaseWithoutTheServer() async throws {
        let storePath = FileManager.default.temporaryDirectory.appending(path: "relay-cli-\(UUID())/relay.sqlite").path
        var serverBalances: [String: JSONValue] = [:]
        try await withSim { base in
            let relay = try RelayProcess(env: [
                "ALLOWANCE_RELAY_SERVER_URL": base.absoluteString, "ALLOWANCE_RELAY_SERVER_TOKEN": "e2e-token",
                "ALLOWANCE_RELAY_STORE_PATH": storePath,
            ])
            #expect(await relay.waitFor("caught up"))
            try await simPost(base, "/_sim/burst?count=8")
            #expect(await relay.waitFor(count: 8, of: "BalanceUpdated child="))
            // Log lines name the child, with its id.
            #expect(
                relay.output.contains("child=Alice (11111111-1111-4111-8111-111111111111)")
                    || relay.output.contains("child=Bob (22222222")
                    || relay.output.contains("child=Carol (33333333"), "\(relay.output.suffix(1500))")
            await relay.expectCleanStop()
            for c in try await APIClient(baseURL: base, token: "e2e-token").children() {
                serverBalances[c.id.uuidString.lowercased()] = .string(Money.plain(c.currentBalance))
            }
        }
        // The simulator is gone now: these read only the cache.
        let env = ["ALLOWANCE_RELAY_STORE_PATH": storePath]
        let balances = try JSONValue(
            parsing: Array(try await RelayProcess.output(["balances", "--json"], env: env).utf8))
        #expect(balances.arrayValue?.count == 3)
        for b in balances.arrayValue ?? [] {
            #expect(b["balance"] == serverBalances[b["id"]?.stringValue ?? ""], "money as an exact string: \(b)")
            #expect(b["currency"] == "USD")
        }
        let status = try JSONValue(parsing: Array(try await RelayProcess.output(["status", "--json"], env: env).utf8))
        #expect(status["transactions"] == 8)
        #expect(status["stale"] == false)
        let all = try JSONValue(
            parsing: Array(try await RelayProcess.output(["transactions", "--json", "--limit", "100"], env: env).utf8))
        let alice = try JSONValue(
            parsing: Array(
                try await RelayProcess.output(["transactions", "--child", "Alice", "--json"], env: env).utf8))
        #expect(all.arrayValue?.count == 8)
        let recent = try JSONValue(
            parsing: Array(try await RelayProcess.output(["transactions", "--since", "1h", "--json"], env: env).utf8))
        let future = try JSONValue(
            parsing: Array(
                try await RelayProcess.output(["transactions", "--since", "2099-01-01", "--json"], env: env).utf8))
        #expect(recent.arrayValue?.count == 8 && future.arrayValue?.count == 0)
        let badSince = try RelayProcess(env: env, arguments: ["transactions", "--since", "last week"])
        #expect(await badSince.wait() != 0 && badSince.output.contains("--since must be a date"))
        #expect(
            alice.arrayValue?.allSatisfy {
                $0["childId"] == "11111111-1111-4111-8111-111111111111" && $0["childName"] == "Alice"
            } == true)
        #expect(
            all.arrayValue?.allSatisfy { $0["amount"]?.stringValue?.contains(".") == true && $0["currency"] == "USD" }
                == true, "\(all)")
        let missing = try RelayProcess(
            env: ["ALLOWANCE_RELAY_STORE_PATH": "/nonexistent/relay.sqlite"], arguments: ["status"])
        #expect(await missing.wait() == 69, "nothing to read yet: unavailable")
        #expect(missing.output.contains("No database at /nonexistent/relay.sqlite yet"))
    }

    /// Without --config, a command finds the user's config file; a relative path in it is taken from the file's
    /// folder (not from where the command runs); and a broken file is refused by every command, not only by `run`.
    @Test func aWriteQueuedWhileTheRelayRunsGoesAtOnce() async throws {
        let storePath = FileManager.default.temporaryDirectory.appending(path: "relay-signal-\(UUID())/relay.sqlite")
            .path
        try await withSim { base in
            let relay = try RelayProcess(env: [
                "ALLOWANCE_RELAY_SERVER_URL": base.absoluteString, "ALLOWANCE_RELAY_SERVER_TOKEN": "e2e-token",
                "ALLOWANCE_RELAY_STORE_PATH": storePath,
            ])
            #expect(await relay.waitFor("caught up"))
            let said = try await RelayProcess.output(
                [
                    "transaction", "add", "--child", "Alice", "--amount", "1.25", "--type", "credit", "--description",
                    "Signalled",
                ],
                env: ["ALLOWANCE_RELAY_STORE_PATH": storePath])
            #expect(said.contains("The running relay (pid"), "\(said)")
            #expect(
                await relay.waitFor("outbox write sent", timeout: .seconds(20)), "sent well before the minute's look")
            await relay.expectCleanStop()
            let server = try await APIClient(baseURL: base, token: "e2e-token").children()
            #expect(
                server.first { $0.firstName == "Alice" }?.currentBalance == Decimal(string: "26.75")!,
                "25.50 + 1.25, once")
        }
    }

    @Test func writesMadeWithTheBackendDownAreSentOnceWhenItIsBack() async throws {
        let storePath = FileManager.default.temporaryDirectory.appending(path: "relay-outbox-\(UUID())/relay.sqlite")
            .path
        // A first run fills the cache (children), then everything stops.
        try await withSim { base in
            let relay = try RelayProcess(env: [
                "ALLOWANCE_RELAY_SERVER_URL": base.absoluteString, "ALLOWANCE_RELAY_SERVER_TOKEN": "e2e-token",
                "ALLOWANCE_RELAY_STORE_PATH": storePath,
            ])
            #expect(await relay.waitFor("caught up"))
            await relay.expectCleanStop()
        }
        // No backend at all: two writes go to the outbox.
        let cache = ["ALLOWANCE_RELAY_STORE_PATH": storePath]
        _ = try await RelayProcess.output(
            [
                "transaction", "add", "--child", "Alice", "--amount", "5.00", "--type", "credit", "--description",
                "Chores",
            ], env: cache)
        _ = try await RelayProcess.output(
            ["transaction", "add", "--child", "Bob", "--amount", "2.50", "--type", "debit", "--description", "Comic"],
            env: cache)
        let queued = try JSONValue(
            parsing: Array(try await RelayProcess.output(["status", "--json"], env: cache).utf8))
        #expect(queued["outboxWaiting"] == 2)
        // A new backend (fresh simulator, same seeded family) and the relay: the outbox drains.
        try await withSim { base in
            let relay = try RelayProcess(env: [
                "ALLOWANCE_RELAY_SERVER_URL": base.absoluteString, "ALLOWANCE_RELAY_SERVER_TOKEN": "e2e-token",
                "ALLOWANCE_RELAY_STORE_PATH": storePath,
            ])
            #expect(await relay.waitFor(count: 2, of: "outbox write sent"))
            await relay.expectCleanStop()
            let server = try await APIClient(baseURL: base, token: "e2e-token").children()
            #expect(
                server.first { $0.firstName == "Alice" }?.currentBalance == Decimal(string: "30.50")!,
                "25.50 + 5.00, once")
            #expect(
                server.first { $0.firstName == "Bob" }?.currentBalance == Decimal(string: "9.50")!, "12.00 - 2.50, once"
            )
        }
        let after = try JSONValue(parsing: Array(try await RelayProcess.output(["status", "--json"], env: cache).utf8))
        #expect(after["outboxWaiting"] == 0 && after["outboxRejected"] == 0)
        let store = try Store.open(path: storePath)
        #expect(
            try store.transactions().allSatisfy { $0.createdByName == "Parent" },
            "the server's versions replaced the local ones")
    }

    @Test func idOnlyTransactionCreatedIsResolvedOverREST() async throws {
        try await withSim { base in
            let storePath = FileManager.default.temporaryDirectory.appending(
                path: "relay-idonly-\(UUID())/relay.sqlite"
            ).path
            let relay = try RelayProcess(env: [
                "ALLOWANCE_RELAY_SERVER_URL": base.absoluteString, "ALLOWANCE_RELAY_SERVER_TOKEN": "e2e-token",
                "ALLOWANCE_RELAY_STORE_PATH": storePath,
            ])
            #expect(await relay.waitFor("caught up"))
            try await simPost(base, "/_sim/payload?mode=id")
            try await simPost(base, "/_sim/burst?count=3")
            #expect(await relay.waitFor(count: 3, of: "id only: details come from the REST API"))
            // The id-only events trigger a catch-up (catch-ups start at least 3 s apart), which brings the details.
            let store = try Store.open(path: storePath)
            let deadline = ContinuousClock.now + .seconds(15)
            while ContinuousClock.now < deadline, try store.transactions().count < 3 {
                try await Task.sleep(for: .milliseconds(100))
            }
            await relay.expectCleanStop()
            #expect(try store.transactions().count == 3)
        }
    }

    @Test func statusShowsTheSyncStateWhileTheRelayRuns() async throws {
        try await withSim { base in
            let storePath = FileManager.default.temporaryDirectory.appending(path: "relay-state-\(UUID())/relay.sqlite")
                .path
            let relay = try RelayProcess(env: [
                "ALLOWANCE_RELAY_SERVER_URL": base.absoluteString, "ALLOWANCE_RELAY_SERVER_TOKEN": "e2e-token",
                "ALLOWANCE_RELAY_STORE_PATH": storePath,
            ])
            #expect(await relay.waitFor("sync: syncing -> idle (caught up)"))
            let cache = ["ALLOWANCE_RELAY_STORE_PATH": storePath]
            let idle = try JSONValue(
                parsing: Array(try await RelayProcess.output(["status", "--json"], env: cache).utf8))
            #expect(idle["sync"]?["phase"] == "idle")
            try await simPost(base, "/_sim/refuse?seconds=30")  // drops the hub and refuses new connections
            #expect(await relay.waitFor("sync: idle -> offline (hub connection lost"))
            let offline = try JSONValue(
                parsing: Array(try await RelayProcess.output(["status", "--json"], env: cache).utf8))
            #expect(offline["sync"]?["phase"] == "offline")
            #expect(offline["sync"]?["detail"]?.stringValue?.hasPrefix("hub connection lost") == true)
            await relay.expectCleanStop()
        }
    }

}
