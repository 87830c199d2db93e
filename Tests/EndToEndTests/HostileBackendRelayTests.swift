import AllowanceAPI
import Foundation
import Store
import TestSupport
import Testing

/// The relay binary against a backend that misbehaves on purpose (RELIABILITY.md, "hostile backend").
@Suite(.serialized, .timeLimit(.minutes(2))) struct HostileBackendRelayTests {
    /// A hub that accepts and ends every link at once (Close with allowReconnect): once 3,600 negotiates and as
    /// many full catch-ups in 20 s; now a few, with one line saying what is going on.
    @Test func aHubThatDropsEveryLinkIsNotStormed() async throws {
        try await withSim { base in
            let relay = try RelayProcess(env: [
                "ALLOWANCE_RELAY_SERVER_URL": base.absoluteString, "ALLOWANCE_RELAY_SERVER_TOKEN": "e2e-token",
            ])
            #expect(await relay.waitFor("caught up"))
            let before = try await simStats(base)
            try await simPost(base, "/_sim/flap?mode=close")
            try await simPost(base, "/_sim/drop")
            let seconds = 20.0
            let cpuBefore = cpuSeconds(relay.pid)
            try await Task.sleep(for: .seconds(seconds))
            let after = try await simStats(base)
            let negotiations = (after["negotiations"] ?? 0) - (before["negotiations"] ?? 0)
            let catchUps = ((after["childrenRequests"] ?? 0) - (before["childrenRequests"] ?? 0)) / 2
            let cpu = cpuSeconds(relay.pid) - cpuBefore
            print(
                "hostile flapping hub: \(negotiations) negotiations, \(catchUps) catch-ups, \(String(format: "%.2f", cpu)) CPU s in \(Int(seconds)) s"
            )
            ReliabilityFigures.record(
                "hostile backend: a hub that ends every link at once",
                [
                    ("seconds", Int(seconds)), ("negotiations", negotiations), ("catch_ups", catchUps),
                    ("cpu_ms", Int(cpu * 1000)),
                ])
            #expect((3...10).contains(negotiations), "\(negotiations) negotiations in \(seconds) s")
            #expect(catchUps <= negotiations, "\(catchUps) catch-ups")
            #expect(
                relay.output.components(separatedBy: "keeps ending the link soon after it is made").count - 1 == 1,
                "said once")
            await relay.expectCleanStop()
        }
    }
}

/// User and system CPU time of a process so far, from /proc/PID/stat.
func cpuSeconds(_ pid: Int32) -> Double {
    guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
        let close = stat.lastIndex(of: ")")
    else { return 0 }
    let fields = stat[stat.index(after: close)...].split(separator: " ")
    // After the command: state is field 3, utime 14 and stime 15 (1-based, counting pid and comm).
    guard fields.count > 13, let user = Double(fields[11]), let system = Double(fields[12]) else { return 0 }
    return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
}
