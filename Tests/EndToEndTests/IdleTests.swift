import Foundation
import TestSupport
import Testing

/// At rest the relay wakes for its own timers only. libdispatch's thread pool never starts: its first worker would
/// start the pool's monitor, which wakes the process every second for good (BENCHMARKS.md, session 35), because the
/// relay's tasks run on a pool of its own (`DefaultExecutor`) and sleep on its alarm clock.
@Suite(.timeLimit(.minutes(1))) struct IdleTests {
    /// Each thread of process `pid`: its name and how many times it has gone to sleep (voluntary context switches).
    func threads(_ pid: Int32) -> [(name: String, switches: Int)] {
        let ids = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []
        return ids.compactMap { id in
            guard let name = try? String(contentsOfFile: "/proc/\(pid)/task/\(id)/comm", encoding: .utf8),
                let status = try? String(contentsOfFile: "/proc/\(pid)/task/\(id)/status", encoding: .utf8),
                let line = status.split(separator: "\n").first(where: { $0.hasPrefix("voluntary_ctxt_switches:") }),
                let count = Int(line.split(separator: "\t").last ?? "")
            else { return nil }
            return (name.trimmingCharacters(in: .whitespacesAndNewlines), count)
        }
    }

    @Test func aRestingRelayStartsNoLibdispatchPoolAndNothingTicksEverySecond() async throws {
        let hook = WebhookReceiver()
        try await hook.run { hookURL in
            try await withSim { base in
                let dir = FileManager.default.temporaryDirectory.appending(path: "relay-idle-\(UUID())")
                try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
                let file = dir.appending(path: "relay.yaml").path
                try "sinks:\n  hook:\n    type: webhook\n    url: \(hookURL.absoluteString)/hook\n".write(
                    toFile: file, atomically: true, encoding: .utf8)
                let relay = try RelayProcess(
                    env: simRelayEnv(base, store: dir.appending(path: "relay.sqlite").path),
                    arguments: ["run", "--config", file])
                #expect(await relay.waitFor("caught up"))
                // Work first (events stored, alerts sent, sleeps and timeouts set), then rest.
                try await simPost(base, "/_sim/burst?count=5")
                #expect(await eventually(.seconds(15)) { hook.received.count >= 5 }, "\(relay.output)")
                try await Task.sleep(for: .seconds(1))
                let dispatch = { self.threads(relay.pid).filter { $0.name.contains("qos") } }
                #expect(
                    !dispatch().contains { $0.name.hasSuffix("default-qos") },
                    "no worker of libdispatch's pool: \(self.threads(relay.pid))")
                let before = dispatch().map(\.switches).reduce(0, +)
                try await Task.sleep(for: .seconds(3))
                let after = dispatch().map(\.switches).reduce(0, +)
                #expect(after - before <= 1, "libdispatch's threads woke \(after - before) times in 3 s at rest")
                await relay.expectCleanStop()
            }
        }
    }
}
