import Foundation
import Store
import TestSupport
import Testing

/// At rest the relay wakes for its own timers only. libdispatch's thread pool never starts: its first worker would
/// start the pool's monitor, which wakes the process every second for good (BENCHMARKS.md, session 35), because the
/// relay's tasks run on a pool of its own (`DefaultExecutor`) and sleep on its alarm clock.
@Suite(.timeLimit(.minutes(1))) struct IdleTests {
    /// A relay with one webhook sink (and `config`'s lines, if any), connected to a fresh simulator and caught up.
    func withRelay(
        config: String = "",
        _ body: (RelayProcess, _ storePath: String, _ sim: URL, WebhookReceiver) async throws -> Void
    ) async throws {
        let hook = WebhookReceiver()
        try await hook.run { hookURL in
            try await withSim { base in
                let dir = FileManager.default.temporaryDirectory.appending(path: "relay-idle-\(UUID())")
                try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
                let file = dir.appending(path: "relay.yaml").path
                try "\(config)sinks:\n  hook:\n    type: webhook\n    url: \(hookURL.absoluteString)/hook\n".write(
                    toFile: file, atomically: true, encoding: .utf8)
                let storePath = dir.appending(path: "relay.sqlite").path
                let relay = try RelayProcess(
                    env: simRelayEnv(base, store: storePath), arguments: ["run", "--config", file])
                #expect(await relay.waitFor("caught up"))
                try await body(relay, storePath, base, hook)
                await relay.expectCleanStop()
            }
        }
    }

    @Test func aRestingRelayStartsNoLibdispatchPoolAndNothingTicksEverySecond() async throws {
        try await withRelay { relay, storePath, base, hook in
            // Work first (events stored, alerts sent, sleeps and timeouts set), then rest.
            try await simPost(base, "/_sim/burst?count=5")
            #expect(await eventually(.seconds(15)) { hook.received.count >= 5 }, "\(relay.output)")
            #expect(await ledgerSettled(try Store.open(path: storePath)), "every outcome written: now at rest")
            let dispatch = { ProcessThreads.sleeps(of: relay.pid).filter { $0.name.contains("qos") } }
            #expect(
                !dispatch().contains { $0.name.hasSuffix("default-qos") },
                "no worker of libdispatch's pool: \(ProcessThreads.sleeps(of: relay.pid))")
            let before = dispatch().map(\.switches).reduce(0, +)
            // The window is the measurement: a once-a-second timer shows three times in it, the relay's own none.
            try await Task.sleep(for: .seconds(3))
            let after = dispatch().map(\.switches).reduce(0, +)
            #expect(after - before <= 1, "libdispatch's threads woke \(after - before) times in 3 s at rest")
        }
    }

    /// A quiet link's keep-alive wakes the connection's loop, not the alarm clock or the pool: the ping waits on the
    /// loop's own timer, and a sleep's end (each worker's minute-long wait) wakes the alarm clock and the sleeper
    /// only, never a pool thread in between. With a ping a second, the alarm clock and the pool would wake at least
    /// three times each in the window if either were on the ping's path.
    @Test func aQuietLinksPingsWakeTheLoopNotTheAlarmClockOrThePool() async throws {
        try await withRelay(config: "server:\n  keep_alive_interval: 1s\n") { relay, storePath, _, _ in
            #expect(await ledgerSettled(try Store.open(path: storePath)), "caught up and at rest")
            let count = { (named: (String) -> Bool) in
                ProcessThreads.sleeps(of: relay.pid).filter { named($0.name) }.map(\.switches).reduce(0, +)
            }
            let loop = { (name: String) in name.hasPrefix("signalr-") }
            let others = { (name: String) in name == "alarm-clock" || name == "pool" }
            let (loopBefore, othersBefore) = (count(loop), count(others))
            // The window is the measurement: three pings in it.
            try await Task.sleep(for: .seconds(3.5))
            let (loopWakes, otherWakes) = (count(loop) - loopBefore, count(others) - othersBefore)
            #expect(loopWakes >= 3, "the loop sent a ping a second (it woke \(loopWakes) times)")
            #expect(
                otherWakes <= 2,
                "the alarm clock and the pool woke \(otherWakes) times in 3.5 s: \(ProcessThreads.sleeps(of: relay.pid))"
            )
        }
    }

    /// A summary rule waits for its time on the alarm clock, looking at the wall clock once a minute at most: it used
    /// to nap a second at a time (so that a stop was seen), which woke the alarm clock and a pool thread each second
    /// for as long as the relay ran.
    @Test func aSummaryRuleWaitsForItsTimeWithoutWakingEverySecond() async throws {
        let rule = "rules:\n  - name: morning\n    summary: daily at 07:00\n    to: hook\n"
        try await withRelay(config: rule) { relay, storePath, _, _ in
            #expect(await relay.waitFor("summary rule morning: first summary at"))
            #expect(await ledgerSettled(try Store.open(path: storePath)), "caught up and at rest")
            let count = {
                ProcessThreads.sleeps(of: relay.pid).filter { $0.name == "alarm-clock" || $0.name == "pool" }
                    .map(\.switches).reduce(0, +)
            }
            let before = count()
            // The window is the measurement: naps of a second show six times in it (three each).
            try await Task.sleep(for: .seconds(3))
            let woke = count() - before
            #expect(
                woke <= 2,
                "the alarm clock and the pool woke \(woke) times in 3 s: \(ProcessThreads.sleeps(of: relay.pid))")
        }
    }
}
