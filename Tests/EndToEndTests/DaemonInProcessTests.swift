import AllowanceAPI
import Foundation
import Logging
import Relay
import RelayDaemon
import Store
import TestSupport
import Testing

/// The daemon's services run in this process, as the executable wires them: against the simulator, a real
/// webhook receiver and a real SQLite file. (DaemonTests does the same through the binary, with signals.)
@Suite(.timeLimit(.minutes(1))) struct DaemonInProcessTests {
    @Test func theDaemonRelaysEventsAndStopsGracefullyInProcess() async throws {
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
                let config = try RelayConfig.parse("sinks:\n  hook:\n    type: webhook\n    url: \(hook.appending(path: "hook"))\n", file: "t.yaml")
                let store = try Store.open(path: db)
                let logger = Logger(label: "daemon-in-process")
                let engine = RelayEngine(store: store, config: config, logger: logger)
                try engine.install()
                let daemon = Daemon(
                    settings: settings, store: store, engine: engine, metrics: RelayMetrics(bootstrap: false), http: .shared,
                    reload: { (settings, config) }, logger: logger)
                let running = Task { await daemon.run() }

                #expect(await eventually(.seconds(15)) { (try? store.linkStatus())??.state == .connected })
                #expect(await eventually(.seconds(15)) { (try? store.syncStatus())??.phase == .idle }, "caught up")
                try await simPost(base, "/_sim/burst?count=3")
                #expect(await eventually(.seconds(15)) { receiver.received.count == 3 }, "three alerts delivered")

                await daemon.stop()
                #expect(await running.value == 0, "a graceful stop ends with 0")
                #expect(try store.linkStatus()?.state == .stopped)
                #expect(try await store.summary().transactions == Scenario.serverTransactions(base).count, "every event stored")
                #expect(try store.deliveryCounts()["hook"]?["delivered"] == 3)
            }
        }
    }
}
