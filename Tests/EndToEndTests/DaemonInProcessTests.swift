import AllowanceAPI
import Config
import Foundation
import Logging
import Relay
import RelayDaemon
import Store
import Synchronization
import TestSupport
import Testing

/// The daemon's services run in this process, as the executable wires them: against the simulator, a real
/// webhook receiver and a real SQLite file; relaying, a reload and a graceful stop. (DaemonTests does the same
/// through the binary, with the signals.)
@Suite(.timeLimit(.minutes(1))) struct DaemonInProcessTests {
    @Test func theDaemonRelaysReloadsAndStopsGracefullyInProcess() async throws {
        try await withSim { base in
            let dir = FileManager.default.temporaryDirectory.appending(path: "relay-inproc-\(UUID())")
            try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
            let db = dir.appending(path: "relay.sqlite").path
            let receiver = WebhookReceiver()
            try await receiver.run { hook in
                let settings = try await RelaySettings.load(
                    file: nil,
                    environment: [
                        "ALLOWANCE_RELAY_SERVER_URL": base.absoluteString, "ALLOWANCE_RELAY_SERVER_TOKEN": "e2e-token",
                        "ALLOWANCE_RELAY_STORE_PATH": db,
                    ])
                let config = try AlertSettings.parse(
                    "sinks:\n  hook:\n    type: webhook\n    url: \(hook.appending(path: "hook"))\n", file: "t.yaml")
                let logger = Logger(label: "daemon-in-process")
                // What a reload reads: the test changes it, as an edited file would.
                let next = Mutex<Result<AlertSettings, ConfigErrors>>(.success(config))
                // The production start (`run` calls the same): store, prune, requeue, the relay's rules.
                let daemon = try Daemon.start(
                    settings: settings, relayConfig: config, metrics: RelayMetrics(bootstrap: false), http: .shared,
                    reload: { () async throws(ConfigErrors) -> (RelaySettings, AlertSettings) in
                        (settings, try next.withLock { $0 }.get())
                    },
                    logger: logger)
                let store = try #require(daemon.storage.file)
                let running = Task { await daemon.run() }

                #expect(await eventually(.seconds(15)) { (try? store.linkStatus())??.state == .connected })
                #expect(await eventually(.seconds(15)) { (try? store.syncStatus())??.phase == .idle }, "caught up")
                try await simPost(base, "/_sim/burst?count=3")
                #expect(await eventually(.seconds(15)) { receiver.received.count == 3 }, "three alerts delivered")

                // A reload, as SIGHUP gives: the alerts go to the new sink from then on, on the same hub link.
                let connection = try store.linkStatus()?.connectionId
                next.withLock {
                    $0 = .success(
                        try! AlertSettings.parse(
                            "sinks:\n  hook:\n    type: webhook\n    url: \(hook.appending(path: "second"))\n",
                            file: "t.yaml"))
                }
                #expect(await daemon.reload())
                try await simPost(base, "/_sim/burst?count=2")
                #expect(
                    await eventually(.seconds(15)) {
                        receiver.received.filter { $0.path.hasSuffix("/second") }.count == 2
                    })
                // A broken file is refused and the running configuration stays.
                next.withLock {
                    $0 = .failure(
                        ConfigErrors([
                            ConfigError(file: "t.yaml", line: 1, column: 1, key: "sinks", "broken", fix: "mend it")
                        ]))
                }
                #expect(await daemon.reload() == false)
                try await simPost(base, "/_sim/burst?count=1")
                #expect(
                    await eventually(.seconds(15)) {
                        receiver.received.filter { $0.path.hasSuffix("/second") }.count == 3
                    })
                #expect(try store.linkStatus()?.connectionId == connection, "one hub connection all along")

                await daemon.stop()
                #expect(await running.value == 0, "a graceful stop ends with 0")
                #expect(try store.linkStatus()?.state == .stopped)
                #expect(
                    try await store.summary().transactions == ServerTruth.transactions(base).count, "every event stored"
                )
                #expect(try store.deliveryCounts()["hook"]?["delivered"] == 6)
            }
        }
    }
}
