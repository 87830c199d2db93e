import AllowanceAPI
import Core
import Foundation
import Store
import Testing

/// Times as the family reads them: CLI tables in relay.time_zone (`--utc` for scripts; `--json` stays ISO 8601),
/// and waits in log lines rounded.
@Suite(.serialized) struct LocalTimeTests {
    @Test func tablesShowTheFamilysTimeAndUTCOnRequest() async throws {
        let dir = FileManager.default.temporaryDirectory.appending(path: "relay-time-\(UUID())")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let db = dir.appending(path: "relay.sqlite").path
        let alice = UUID()
        let at = ISODate.parse("2026-11-24T14:30:05Z")!
        try Store.open(path: db).storeCaughtUp(
            children: [Child(id: alice, firstName: "Alice", lastName: "E", weeklyAllowance: 10, currentBalance: 6)],
            transactions: [
                Transaction(
                    id: UUID(), childId: alice, amount: 1, type: .credit, description: "Chores", balanceAfter: 6,
                    createdAt: at, createdByName: "Pat")
            ])
        let file = dir.appending(path: "relay.yaml").path
        try "relay:\n  time_zone: Asia/Tokyo\n".write(toFile: file, atomically: true, encoding: .utf8)
        let env = ["ALLOWANCE_RELAY_STORE_PATH": db]
        let local = try RelayProcess(env: env, arguments: ["transactions", "--config", file])
        #expect(await local.wait() == 0)
        #expect(
            local.output.contains("WHEN (Asia/Tokyo)") && local.output.contains("2026-11-24 23:30:05"),
            "\(local.output)")
        let utc = try RelayProcess(env: env, arguments: ["transactions", "--config", file, "--utc"])
        #expect(await utc.wait() == 0)
        #expect(utc.output.contains("WHEN (UTC)") && utc.output.contains("2026-11-24 14:30:05"), "\(utc.output)")
        let json = try RelayProcess(env: env, arguments: ["transactions", "--config", file, "--json"])
        #expect(await json.wait() == 0)
        #expect(json.output.contains(#""createdAt":"2026-11-24T14:30:05Z""#), "\(json.output)")
    }

    @Test func waitsInLogLinesAreRounded() {
        #expect(spoken(.milliseconds(148)) == "0.15 s")
        #expect(spoken(.seconds(2)) == "2 s")
        #expect(spoken(seconds: 12.4) == "12 s")
        #expect(spoken(seconds: 150) == "2 min 30 s")
        #expect(spoken(seconds: 600) == "10 min")
        #expect(spoken(seconds: 3 * 3600 + 5 * 60 + 10) == "3 h 5 min")
    }
}
