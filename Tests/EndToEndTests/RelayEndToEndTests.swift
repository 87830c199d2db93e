import AllowanceAPI
import Core
import Foundation
import SignalRProtocol
import TestSupport
import Store
import Synchronization
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
            let relay = try RelayProcess(env: ["ALLOWANCE_RELAY_SERVER_URL": base.absoluteString, "ALLOWANCE_RELAY_SERVER_TOKEN": "e2e-token",
                                               "ALLOWANCE_RELAY_LOG_FORMAT": "json"])
            #expect(await relay.waitFor("connected to the hub"))
            var request = URLRequest(url: base.appending(path: "_sim/burst").appending(queryItems: [.init(name: "count", value: "3")]))
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
            let relay = try RelayProcess(env: ["ALLOWANCE_RELAY_SERVER_URL": base.absoluteString, "ALLOWANCE_RELAY_SERVER_TOKEN": "e2e-token"])
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
            let relay = try RelayProcess(env: ["ALLOWANCE_RELAY_SERVER_URL": base.absoluteString, "ALLOWANCE_RELAY_SERVER_TOKEN": "wrong-token"])
            #expect(await relay.wait() == 77)
            #expect(relay.output.contains("refused the access token"))
            #expect(!relay.output.contains("wrong-token"))
        }
    }

    /// The same token refused at a reconnect ends the daemon as it does at start (exit 77, which the units do not
    /// restart), rather than knocking on the hub forever with it.
    @Test func aTokenRefusedAtAReconnectExits77AsAtStart() async throws {
        try await withSim { base in
            let relay = try RelayProcess(env: ["ALLOWANCE_RELAY_SERVER_URL": base.absoluteString, "ALLOWANCE_RELAY_SERVER_TOKEN": "e2e-token"])
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
            let relay = try RelayProcess(env: ["ALLOWANCE_RELAY_SERVER_URL": base.absoluteString,
                                               "ALLOWANCE_RELAY_SERVER_EMAIL": "parent@example.com",
                                               "ALLOWANCE_RELAY_SERVER_PASSWORD_FILE": passwordFile])
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
            let storePath = FileManager.default.temporaryDirectory.appending(path: "relay-kill-\(UUID())/relay.sqlite").path
            let env = ["ALLOWANCE_RELAY_SERVER_URL": base.absoluteString, "ALLOWANCE_RELAY_SERVER_TOKEN": "e2e-token",
                       "ALLOWANCE_RELAY_STORE_PATH": storePath]
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
            #expect(stored == 1005, "stored \(stored); first run:\n\(first.output.suffix(3000))\nsecond run:\n\(second.output.suffix(3000))")
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
            let env = ["ALLOWANCE_RELAY_SERVER_URL": base.absoluteString, "ALLOWANCE_RELAY_SERVER_TOKEN": "e2e-token",
                       "ALLOWANCE_RELAY_STORE_PATH": storePath]
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
            let storePath = FileManager.default.temporaryDirectory.appending(path: "relay-damaged-\(UUID())/relay.sqlite").path
            let env = ["ALLOWANCE_RELAY_SERVER_URL": base.absoluteString, "ALLOWANCE_RELAY_SERVER_TOKEN": "e2e-token",
                       "ALLOWANCE_RELAY_STORE_PATH": storePath]
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
            let relay = try RelayProcess(env: ["ALLOWANCE_RELAY_SERVER_URL": base.absoluteString, "ALLOWANCE_RELAY_SERVER_TOKEN": "e2e-token",
                                               "ALLOWANCE_RELAY_STORE_PATH": storePath])
            #expect(await relay.waitFor("caught up"))
            try await simPost(base, "/_sim/burst?count=8")
            #expect(await relay.waitFor(count: 8, of: "BalanceUpdated child="))
            // Log lines name the child, with its id.
            #expect(
                relay.output.contains("child=Alice (11111111-1111-4111-8111-111111111111)") || relay.output.contains("child=Bob (22222222")
                    || relay.output.contains("child=Carol (33333333"), "\(relay.output.suffix(1500))")
            await relay.expectCleanStop()
            for c in try await APIClient(baseURL: base, token: "e2e-token").children() {
                serverBalances[c.id.uuidString.lowercased()] = .string(Money.plain(c.currentBalance))
            }
        }
        // The simulator is gone now: these read only the cache.
        let env = ["ALLOWANCE_RELAY_STORE_PATH": storePath]
        let balances = try JSONValue(parsing: Array(try await RelayProcess.output(["balances", "--json"], env: env).utf8))
        #expect(balances.arrayValue?.count == 3)
        for b in balances.arrayValue ?? [] {
            #expect(b["balance"] == serverBalances[b["id"]?.stringValue ?? ""], "money as an exact string: \(b)")
            #expect(b["currency"] == "USD")
        }
        let status = try JSONValue(parsing: Array(try await RelayProcess.output(["status", "--json"], env: env).utf8))
        #expect(status["transactions"] == 8)
        #expect(status["stale"] == false)
        let all = try JSONValue(parsing: Array(try await RelayProcess.output(["transactions", "--json", "--limit", "100"], env: env).utf8))
        let alice = try JSONValue(parsing: Array(try await RelayProcess.output(["transactions", "--child", "Alice", "--json"], env: env).utf8))
        #expect(all.arrayValue?.count == 8)
        let recent = try JSONValue(parsing: Array(try await RelayProcess.output(["transactions", "--since", "1h", "--json"], env: env).utf8))
        let future = try JSONValue(parsing: Array(try await RelayProcess.output(["transactions", "--since", "2099-01-01", "--json"], env: env).utf8))
        #expect(recent.arrayValue?.count == 8 && future.arrayValue?.count == 0)
        let badSince = try RelayProcess(env: env, arguments: ["transactions", "--since", "last week"])
        #expect(await badSince.wait() != 0 && badSince.output.contains("--since must be a date"))
        #expect(alice.arrayValue?.allSatisfy { $0["childId"] == "11111111-1111-4111-8111-111111111111" && $0["childName"] == "Alice" } == true)
        #expect(all.arrayValue?.allSatisfy { $0["amount"]?.stringValue?.contains(".") == true && $0["currency"] == "USD" } == true, "\(all)")
        let missing = try RelayProcess(env: ["ALLOWANCE_RELAY_STORE_PATH": "/nonexistent/relay.sqlite"], arguments: ["status"])
        #expect(await missing.wait() == 69, "nothing to read yet: unavailable")
        #expect(missing.output.contains("No database at /nonexistent/relay.sqlite yet"))
    }

    /// Without --config, a command finds the user's config file; a relative path in it is taken from the file's
    /// folder (not from where the command runs); and a broken file is refused by every command, not only by `run`.
    @Test func theConfigFindsItselfAndItsPathsAndABrokenOneIsRefusedEverywhere() async throws {
        let home = FileManager.default.temporaryDirectory.appending(path: "relay-xdg-\(UUID())")
        let folder = home.appending(path: "allowance-relay")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let file = folder.appending(path: "relay.yaml").path
        try "store:\n  path: data/relay.sqlite\n".write(toFile: file, atomically: true, encoding: .utf8)
        let env = ["XDG_CONFIG_HOME": home.path, "ALLOWANCE_RELAY_STORE_PATH": ""]
        let status = try RelayProcess(env: env, arguments: ["status"])
        #expect(await status.wait() != 0)
        #expect(status.output.contains("No database at \(folder.path)/data/relay.sqlite yet"), "\(status.output)")
        // The same file, broken: `status` refuses it as `config check` and `run` do, with the one mistake.
        try "store:\n  path: data/relay.sqlite\nsinks:\n  hook:\n    type: webhook\n    url: https://h.example.org/x\n    concurrency: yes\nrules:\n  - event: transaction.created\n    to: hook\n"
            .write(toFile: file, atomically: true, encoding: .utf8)
        let refused = try RelayProcess(env: env, arguments: ["status"])
        #expect(await refused.wait() == 78)
        #expect(refused.output.contains("allowance-relay: configuration error:\n  \(file):7:18: sinks.hook.concurrency:"), "\(refused.output)")
    }

    /// A write queued by `transaction add` while the relay runs goes out at once: the command signals the relay
    /// (SIGUSR1), which drains the outbox then, not at its next look a minute later.
    @Test func aWriteQueuedWhileTheRelayRunsGoesAtOnce() async throws {
        let storePath = FileManager.default.temporaryDirectory.appending(path: "relay-signal-\(UUID())/relay.sqlite").path
        try await withSim { base in
            let relay = try RelayProcess(env: ["ALLOWANCE_RELAY_SERVER_URL": base.absoluteString, "ALLOWANCE_RELAY_SERVER_TOKEN": "e2e-token",
                                               "ALLOWANCE_RELAY_STORE_PATH": storePath])
            #expect(await relay.waitFor("caught up"))
            let said = try await RelayProcess.output(
                ["transaction", "add", "--child", "Alice", "--amount", "1.25", "--type", "credit", "--description", "Signalled"],
                env: ["ALLOWANCE_RELAY_STORE_PATH": storePath])
            #expect(said.contains("The running relay (pid"), "\(said)")
            #expect(await relay.waitFor("outbox write sent", timeout: .seconds(20)), "sent well before the minute's look")
            await relay.expectCleanStop()
            let server = try await APIClient(baseURL: base, token: "e2e-token").children()
            #expect(server.first { $0.firstName == "Alice" }?.currentBalance == Decimal(string: "26.75")!, "25.50 + 1.25, once")
        }
    }

    @Test func writesMadeWithTheBackendDownAreSentOnceWhenItIsBack() async throws {
        let storePath = FileManager.default.temporaryDirectory.appending(path: "relay-outbox-\(UUID())/relay.sqlite").path
        // A first run fills the cache (children), then everything stops.
        try await withSim { base in
            let relay = try RelayProcess(env: ["ALLOWANCE_RELAY_SERVER_URL": base.absoluteString, "ALLOWANCE_RELAY_SERVER_TOKEN": "e2e-token",
                                               "ALLOWANCE_RELAY_STORE_PATH": storePath])
            #expect(await relay.waitFor("caught up"))
            await relay.expectCleanStop()
        }
        // No backend at all: two writes go to the outbox.
        let cache = ["ALLOWANCE_RELAY_STORE_PATH": storePath]
        _ = try await RelayProcess.output(["transaction", "add", "--child", "Alice", "--amount", "5.00", "--type", "credit", "--description", "Chores"], env: cache)
        _ = try await RelayProcess.output(["transaction", "add", "--child", "Bob", "--amount", "2.50", "--type", "debit", "--description", "Comic"], env: cache)
        let queued = try JSONValue(parsing: Array(try await RelayProcess.output(["status", "--json"], env: cache).utf8))
        #expect(queued["outboxWaiting"] == 2)
        // A new backend (fresh simulator, same seeded family) and the relay: the outbox drains.
        try await withSim { base in
            let relay = try RelayProcess(env: ["ALLOWANCE_RELAY_SERVER_URL": base.absoluteString, "ALLOWANCE_RELAY_SERVER_TOKEN": "e2e-token",
                                               "ALLOWANCE_RELAY_STORE_PATH": storePath])
            #expect(await relay.waitFor(count: 2, of: "outbox write sent"))
            await relay.expectCleanStop()
            let server = try await APIClient(baseURL: base, token: "e2e-token").children()
            #expect(server.first { $0.firstName == "Alice" }?.currentBalance == Decimal(string: "30.50")!, "25.50 + 5.00, once")
            #expect(server.first { $0.firstName == "Bob" }?.currentBalance == Decimal(string: "9.50")!, "12.00 - 2.50, once")
        }
        let after = try JSONValue(parsing: Array(try await RelayProcess.output(["status", "--json"], env: cache).utf8))
        #expect(after["outboxWaiting"] == 0 && after["outboxRejected"] == 0)
        let store = try Store.open(path: storePath)
        #expect(try store.transactions().allSatisfy { $0.createdByName == "Parent" }, "the server's versions replaced the local ones")
    }

    @Test func idOnlyTransactionCreatedIsResolvedOverREST() async throws {
        try await withSim { base in
            let storePath = FileManager.default.temporaryDirectory.appending(path: "relay-idonly-\(UUID())/relay.sqlite").path
            let relay = try RelayProcess(env: ["ALLOWANCE_RELAY_SERVER_URL": base.absoluteString, "ALLOWANCE_RELAY_SERVER_TOKEN": "e2e-token",
                                               "ALLOWANCE_RELAY_STORE_PATH": storePath])
            #expect(await relay.waitFor("caught up"))
            try await simPost(base, "/_sim/payload?mode=id")
            try await simPost(base, "/_sim/burst?count=3")
            #expect(await relay.waitFor(count: 3, of: "id only: details come from the REST API"))
            // The id-only events trigger a catch-up (catch-ups start at least 3 s apart), which brings the details.
            let store = try Store.open(path: storePath)
            let deadline = ContinuousClock.now + .seconds(15)
            while ContinuousClock.now < deadline, try store.transactions().count < 3 { try await Task.sleep(for: .milliseconds(100)) }
            await relay.expectCleanStop()
            #expect(try store.transactions().count == 3)
        }
    }

    @Test func statusShowsTheSyncStateWhileTheRelayRuns() async throws {
        try await withSim { base in
            let storePath = FileManager.default.temporaryDirectory.appending(path: "relay-state-\(UUID())/relay.sqlite").path
            let relay = try RelayProcess(env: ["ALLOWANCE_RELAY_SERVER_URL": base.absoluteString, "ALLOWANCE_RELAY_SERVER_TOKEN": "e2e-token",
                                               "ALLOWANCE_RELAY_STORE_PATH": storePath])
            #expect(await relay.waitFor("sync: syncing -> idle (caught up)"))
            let cache = ["ALLOWANCE_RELAY_STORE_PATH": storePath]
            let idle = try JSONValue(parsing: Array(try await RelayProcess.output(["status", "--json"], env: cache).utf8))
            #expect(idle["sync"]?["phase"] == "idle")
            try await simPost(base, "/_sim/refuse?seconds=30")  // drops the hub and refuses new connections
            #expect(await relay.waitFor("sync: idle -> offline (hub connection lost"))
            let offline = try JSONValue(parsing: Array(try await RelayProcess.output(["status", "--json"], env: cache).utf8))
            #expect(offline["sync"]?["phase"] == "offline")
            #expect(offline["sync"]?["detail"]?.stringValue?.hasPrefix("hub connection lost") == true)
            await relay.expectCleanStop()
        }
    }

    @Test func configCheckNamesFileLineAndKeyAndRunRefusesTheSameFile() async throws {
        let dir = FileManager.default.temporaryDirectory.appending(path: "relay-check-\(UUID())")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let file = dir.appending(path: "relay.yaml").path
        try "server:\n  url: http://127.0.0.1:1\n  tokn: abc\n".write(toFile: file, atomically: true, encoding: .utf8)
        let check = try RelayProcess(env: [:], arguments: ["config", "check", "--config", file])
        #expect(await check.wait() == 78)
        #expect(check.output.contains("\(file):3:3: server.tokn: is not a known key. Fix: did you mean server.token?"), "\(check.output)")
        let run = try RelayProcess(env: [:], arguments: ["run", "--config", file])
        #expect(await run.wait() == 78)
        #expect(run.output.contains("server.tokn: is not a known key"))
        let demo = PythonPeer.root.appending(path: "config/demo.yaml").path
        let good = try RelayProcess(env: [:], arguments: ["config", "check", "--config", demo, "--json"])
        #expect(await good.wait() == 0)
        #expect(good.output.contains(#""ok":true"#), "\(good.output)")
    }

    /// A typo in a variable's name was ignored (`Configuration OK`) where the same typo in the file is an error: now
    /// both are, with did-you-mean, and a sink URL gets the same scheme fix as server.url (its path kept back).
    @Test func aMisspeltVariableIsAnErrorAsAMisspeltKeyIs() async throws {
        let dir = FileManager.default.temporaryDirectory.appending(path: "env-typo-\(UUID())")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let file = dir.appending(path: "relay.yaml").path
        try "server:\n  url: http://127.0.0.1:1\n  token: abc\nsinks:\n  hook:\n    type: webhook\n    url: htp//hooks.example.org/secret-path\n"
            .write(toFile: file, atomically: true, encoding: .utf8)
        let check = try RelayProcess(
            env: ["ALLOWANCE_RELAY_SERVER_URLL": "http://x", "ALLOWANCE_RELAY_LOG_LEVL": "debug"],
            arguments: ["config", "check", "--config", file])
        #expect(await check.wait() == 78)
        #expect(
            check.output.contains("environment: ALLOWANCE_RELAY_LOG_LEVL: names no setting. Fix: did you mean ALLOWANCE_RELAY_LOG_LEVEL?"),
            "\(check.output)")
        #expect(check.output.contains("ALLOWANCE_RELAY_SERVER_URLL: names no setting. Fix: did you mean ALLOWANCE_RELAY_SERVER_URL?"))
        #expect(check.output.contains("did you mean https://hooks.example.org/...?") || check.output.contains("did you mean http://hooks.example.org/...?"), "\(check.output)")
        #expect(!check.output.contains("secret-path"), "the sink URL's path is not repeated")
    }

    /// `server.insecure_tls` turns off every certificate check: `config check` says so (in text and JSON), not only
    /// the WebSocket's connect log.
    @Test func configCheckWarnsOfInsecureTLS() async throws {
        let demo = PythonPeer.root.appending(path: "config/demo.yaml").path
        let env = ["ALLOWANCE_RELAY_SERVER_URL": "https://127.0.0.1:1", "ALLOWANCE_RELAY_SERVER_TOKEN": "t"]
        let plain = try RelayProcess(env: env, arguments: ["config", "check", "--config", demo])
        #expect(await plain.wait() == 0)
        #expect(!plain.output.contains("insecure_tls"), "\(plain.output)")
        let insecure = try RelayProcess(env: env.merging(["ALLOWANCE_RELAY_SERVER_INSECURE_TLS": "true"]) { $1 }, arguments: ["config", "check", "--config", demo])
        #expect(await insecure.wait() == 0)
        #expect(insecure.output.contains("warning: server.insecure_tls is on: no TLS certificate or host name is checked"), "\(insecure.output)")
        let json = try RelayProcess(
            env: env.merging(["ALLOWANCE_RELAY_SERVER_INSECURE_TLS": "true"]) { $1 }, arguments: ["config", "check", "--config", demo, "--json"])
        #expect(await json.wait() == 0)
        #expect(json.output.contains("server.insecure_tls is on"), "\(json.output)")
    }

    @Test func invalidConfigurationExits78() async throws {
        let relay = try RelayProcess(env: ["ALLOWANCE_RELAY_SERVER_URL": "not a url"])
        #expect(await relay.wait() == 78)
        #expect(relay.output.contains("configuration error:\n  environment: ALLOWANCE_RELAY_SERVER_URL: 'not a url' is not an http:// or https:// URL"))
    }

    /// A file with several mistakes, in both the settings and the relay's sections, gets all of them at once, each
    /// with file:line:column, key, what is wrong and the fix ("did you mean" where a known word is close); YAML
    /// syntax errors come in the same form; `--json` gives the same as a list of objects; the exit code is 78.
    @Test func configCheckReportsEveryMistakeAtOnceLikeACompiler() async throws {
        let dir = FileManager.default.temporaryDirectory.appending(path: "relay-check-\(UUID())")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let file = dir.appending(path: "relay.yaml").path
        try """
            server:
              url: 127.0.0.1:33525
            relay:
              currency: [USD]
            log:
              levl: debug
            sinks:
              chat:
                type: slak
                url: https://x.example
            rule:
              - event: transaction.created

            """.write(toFile: file, atomically: true, encoding: .utf8)
        let check = try RelayProcess(env: [:], arguments: ["config", "check", "--config", file])
        #expect(await check.wait() == 78)
        #expect(
            check.output.contains(
                """
                allowance-relay: 5 configuration errors:
                  \(file):2:8: server.url: '127.0.0.1:33525' is not an http:// or https:// URL with a host. Fix: did you mean http://127.0.0.1:33525?
                  \(file):4:3: relay.currency: must be a single value, not a list or a mapping. Fix: write one value after the colon, e.g. relay.currency: USD.
                  \(file):6:3: log.levl: is not a known key. Fix: did you mean log.level?
                  \(file):9:11: sinks.chat.type: type 'slak' is not a sink type. Fix: did you mean slack?
                  \(file):11:1: rule: is not a known section. Fix: did you mean rules?
                """), "\(check.output)")
        let json = try RelayProcess(env: [:], arguments: ["config", "check", "--config", file, "--json"])
        #expect(await json.wait() == 78)
        let problems = try JSONValue(parsing: Array(json.output.utf8))["problems"]?.arrayValue ?? []
        #expect(problems.map { $0["key"]?.stringValue ?? "" } == ["server.url", "relay.currency", "log.levl", "sinks.chat.type", "rule"])
        #expect(problems.map { $0["line"]?.intValue ?? 0 } == [2, 4, 6, 9, 11])
        #expect(problems[2]["fix"]?.stringValue == "did you mean log.level?" && problems[2]["column"]?.intValue == 3)

        try "server:\n  url: http://x\n   bad: 1\n".write(toFile: file, atomically: true, encoding: .utf8)
        let syntax = try RelayProcess(env: [:], arguments: ["config", "check", "--config", file])
        #expect(await syntax.wait() == 78)
        #expect(
            syntax.output.contains(
                "\(file):3:7: YAML syntax: mapping values are not allowed in this context. Fix: check the indentation (spaces, not tabs) and the quoting on this line and the one above."
            ), "\(syntax.output)")
    }
}


func withSim(_ body: (URL) async throws -> Void) async throws {
    try await withSimulator(token: "e2e-token", { _ in }, body)
}

/// The environment of a relay against `withSim`'s simulator, with its database at `store`.
func simRelayEnv(_ base: URL, store: String) -> [String: String] {
    ["ALLOWANCE_RELAY_SERVER_URL": base.absoluteString, "ALLOWANCE_RELAY_SERVER_TOKEN": "e2e-token", "ALLOWANCE_RELAY_STORE_PATH": store]
}

/// `allowance-relay run` as a child process, its stdout and stderr collected.
final class RelayProcess: Sendable {
    private let process: Process
    private let collected = OutputBuffer()

    init(env: [String: String], arguments: [String] = ["run"]) throws {
        process = Process()
        process.executableURL = URL(fileURLWithPath: relayBinaryPath)
        process.arguments = arguments
        var environment = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("ALLOWANCE_RELAY_") }
        // Never the user's real database: a fresh file unless the test names one; never the user's own config
        // file either (an empty config folder, unless the test gives one).
        environment["ALLOWANCE_RELAY_STORE_PATH"] =
            FileManager.default.temporaryDirectory.appending(path: "relay-e2e-\(UUID())/relay.sqlite").path
        environment["XDG_CONFIG_HOME"] = FileManager.default.temporaryDirectory.appending(path: "relay-e2e-config-\(UUID())").path
        environment.merge(env) { $1 }
        if environment["ALLOWANCE_RELAY_STORE_PATH"] == "" { environment["ALLOWANCE_RELAY_STORE_PATH"] = nil }  // the config file's
        process.environment = environment
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        try process.run()
        Self.collect(pipe.fileHandleForReading, into: collected)
    }

    /// Reads the relay's output with blocking reads on a thread of its own, to its end (the relay's exit). Not
    /// FileHandle's readabilityHandler: tearing its dispatch read source down races libdispatch's epoll bookkeeping
    /// on Linux (swift-corelibs-libdispatch#949), which crashed a CI run in `_dispatch_event_loop_drain`.
    private static func collect(_ handle: FileHandle, into collected: OutputBuffer) {
        let reader = Thread {
            var buffer = [UInt8](repeating: 0, count: 65_536)
            while true {
                let n = buffer.withUnsafeMutableBytes { read(handle.fileDescriptor, $0.baseAddress, $0.count) }
                if n < 0 && errno == EINTR { continue }
                guard n > 0 else { break }
                collected.append(String(decoding: buffer[..<n], as: UTF8.self))
            }
            collected.end()
            try? handle.close()
        }
        reader.start()
    }

    /// A test that fails (throws) before `stop` would leave its relay running, loading the machine for the tests
    /// after it: the relay goes with the test.
    deinit {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
    }

    var output: String { collected.text }
    var pid: Int32 { process.processIdentifier }

    func waitFor(_ text: String, timeout: Duration = .seconds(15)) async -> Bool {
        await waitFor(count: 1, of: text, timeout: timeout)
    }

    func waitFor(count: Int, of text: String, timeout: Duration = .seconds(15)) async -> Bool {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if output.components(separatedBy: text).count - 1 >= count { return true }
            try? await Task.sleep(for: .milliseconds(50))
        }
        Issue.record("no \(count)× '\(text)' in:\n\(output)")
        return false
    }

    /// Runs a short command to completion and returns its output.
    static func output(_ arguments: [String], env: [String: String]) async throws -> String {
        let p = try RelayProcess(env: env, arguments: arguments)
        let status = await p.wait()
        try #require(status == 0, "allowance-relay \(arguments.joined(separator: " ")) exited \(status): \(p.output)")
        return p.output
    }

    func stop(signal: Int32) async -> Int32 {
        kill(process.processIdentifier, signal)
        return await wait()
    }

    /// SIGTERM, and the exit `run --help` promises for it: 0. Anything else fails the test with how the relay ended
    /// and its last output, which is all there is to go on when it happens once in many runs.
    func expectCleanStop(_ comment: Comment? = nil, sourceLocation: SourceLocation = #_sourceLocation) async {
        // A SIGTERM in a process's first milliseconds, while it is still being loaded, meets the default action (as
        // in any program): a test that stops a relay it has just started waits until the relay catches it.
        #expect(await waitUntilCatching(SIGTERM), "the relay never caught SIGTERM", sourceLocation: sourceLocation)
        let status = await stop(signal: SIGTERM)
        let how = process.isRunning ? "" : process.terminationReason == .uncaughtSignal ? "killed by signal" : "exited"
        #expect(
            status == 0, "\(comment.map { "\($0): " } ?? "")\(how) \(status) after SIGTERM:\n\(output.suffix(4000))",
            sourceLocation: sourceLocation)
    }

    /// Whether the relay has a handler for `signal` yet.
    func catches(_ signal: Int32) -> Bool { SignalDisposition.caught(signal, by: pid) }

    func waitUntilCatching(_ signal: Int32, timeout: Duration = .seconds(15)) async -> Bool {
        let deadline = ContinuousClock.now + timeout
        while !catches(signal) {
            guard process.isRunning, ContinuousClock.now < deadline else { return false }
            try? await Task.sleep(for: .milliseconds(1))
        }
        return true
    }

    /// Waits for the exit, at most `limit`: a relay that does not end is killed and the test fails with its output.
    /// It waits without holding a thread: the suites share a cooperative pool of one thread per core, and a
    /// blocking wait there starved the in-process webhook receiver the relay was waiting for (a graceful stop then
    /// ran into its 10 s deadline with the answer unsent).
    func wait(limit: Duration = .seconds(60)) async -> Int32 {
        let deadline = ContinuousClock.now + limit
        while process.isRunning && ContinuousClock.now < deadline { try? await Task.sleep(for: .milliseconds(20)) }
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            Issue.record("allowance-relay \(process.arguments?.joined(separator: " ") ?? "") did not end within \(limit):\n\(output.suffix(4000))")
            return -1
        }
        // The last output: read to the pipe's end (a child the relay started may hold it open a while longer).
        let readToEnd = ContinuousClock.now + .seconds(2)
        while !collected.ended && ContinuousClock.now < readToEnd { try? await Task.sleep(for: .milliseconds(5)) }
        return process.terminationStatus
    }
}

final class OutputBuffer: Sendable {
    private let storage = Mutex((text: "", ended: false))
    func append(_ s: String) { storage.withLock { $0.text += s } }
    /// The writer's side closed: nothing more will come.
    func end() { storage.withLock { $0.ended = true } }
    var text: String { storage.withLock { $0.text } }
    var ended: Bool { storage.withLock { $0.ended } }
}
