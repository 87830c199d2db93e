import Foundation
import Store
import TestSupport
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// A summary's totals come from the relay's own cache; they must say what the backend's analytics say
/// (`GET /api/v1/analytics/children/{id}/income-spending`) for the same transactions. Read with Foundation's JSON.
@Suite(.serialized, .timeLimit(.minutes(2))) struct AnalyticsAgreementTests {
    @Test func theSummarysIncomeSpendingAndSavingsRateAreTheBackendsAnalytics() async throws {
        try await withSim { base in
            let alice = "11111111-1111-4111-8111-111111111111"
            for (amount, type) in [(8.0, "Credit"), (5.25, "Debit"), (5.0, "Credit"), (2.5, "Debit")] {
                _ = try await simREST(
                    base, "POST", "/api/v1/transactions",
                    ["childId": alice, "amount": amount, "type": type, "description": "week"])
            }
            let dir = FileManager.default.temporaryDirectory.appending(path: "relay-analytics-\(UUID())")
            try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
            // A summary rule due an hour ago: its period holds every transaction the simulator has made.
            let hourAgo = Calendar(identifier: .gregorian).dateComponents(
                in: TimeZone(identifier: "UTC")!, from: Date().addingTimeInterval(-3600))
            let config = dir.appending(path: "relay.yaml").path
            try """
            relay:
              time_zone: UTC
            sinks:
              chat: slack://T/B/X
            rules:
              - name: evening
                summary: daily at \(String(format: "%02d:%02d", hourAgo.hour!, hourAgo.minute!))
                to: chat
            """.write(toFile: config, atomically: true, encoding: .utf8)
            let storePath = dir.appending(path: "relay.sqlite").path
            let relay = try RelayProcess(
                env: simRelayEnv(base, store: storePath), arguments: ["run", "--config", config])
            #expect(await relay.waitFor("caught up"))
            await relay.expectCleanStop()
            let show = try RelayProcess(
                env: simRelayEnv(base, store: storePath),
                arguments: ["summary", "show", "--config", config, "--child", "Alice"])
            #expect(await show.wait() == 0, "\(show.output)")
            let said = try #require(
                show.output.firstMatch(of: /\$([0-9.]+) in, \$([0-9.]+) out \(savings rate (-?[0-9.]+)%\)/),
                "\(show.output)")
            let analytics = try #require(
                try await simREST(base, "GET", "/api/v1/analytics/children/\(alice)/income-spending").json
                    as? [String: Any])
            func figure(_ key: String) -> String {
                String(format: "%.2f", (analytics[key] as? NSNumber)?.doubleValue ?? .nan)
            }
            #expect(String(said.output.1) == figure("totalIncome"), "\(show.output) \(analytics)")
            #expect(String(said.output.2) == figure("totalSpending"), "\(show.output) \(analytics)")
            #expect(String(said.output.3) == figure("savingsRate"), "\(show.output) \(analytics)")
        }
    }
}
