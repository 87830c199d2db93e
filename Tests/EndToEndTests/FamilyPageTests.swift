import Foundation
import Store
import TestSupport
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The family page at `status.listen`, as a parent's browser shows it: Debian's chromium, headless, driven by
/// Selenium, against the real binary and the simulator. The figures it must show come from the simulator's REST API.
@Suite(.serialized, .timeLimit(.minutes(3))) struct FamilyPageTests {
    @Test func aParentSeesBalancesGoalsTheWeeksChartAlertsAndSinks() async throws {
        try #require(PythonPeer.available)
        try #require(FileManager.default.isExecutableFile(atPath: "/usr/bin/chromedriver"), "apt: chromium-driver")
        let hook = WebhookReceiver()
        try await hook.run { hookURL in
            try await withSim { base in
                let children = try #require(try await simREST(base, "GET", "/api/v1/children").json as? [[String: Any]])
                let alice = try #require(children.first { $0["firstName"] as? String == "Alice" })
                let bob = try #require(children.first { $0["firstName"] as? String != "Alice" })
                let aliceId = try #require(alice["id"] as? String)
                let balance = try #require((alice["currentBalance"] as? NSNumber)?.decimalValue)
                _ = try await simREST(
                    base, "POST", "/api/v1/wishlist",
                    ["childId": aliceId, "name": "Bike <helmet>", "price": NSDecimalNumber(decimal: balance * 2)])
                let dir = FileManager.default.temporaryDirectory.appending(path: "relay-page-\(UUID())")
                try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
                let port = try freeLoopbackPortOutsideEphemeralRange()
                let config = dir.appending(path: "relay.yaml").path
                try """
                status:
                  listen: 127.0.0.1:\(port)
                sinks:
                  hook:
                    type: webhook
                    url: \(hookURL.absoluteString)/hook
                rules:
                  - event: transaction.created
                    to: hook
                    digest: false
                """.write(toFile: config, atomically: true, encoding: .utf8)
                let storePath = dir.appending(path: "relay.sqlite").path
                let relay = try RelayProcess(
                    env: simRelayEnv(base, store: storePath), arguments: ["run", "--config", config])
                #expect(await relay.waitFor("caught up"))
                // Waits (not the oracle) for the relay's first read of the wish list.
                #expect(await eventually { (try? Store.open(path: storePath).goals(child: nil).count) == 1 })
                _ = try await simREST(
                    base, "POST", "/api/v1/transactions",
                    ["childId": bob["id"] as? String ?? "", "amount": 1.25, "type": "Credit", "description": "chores"])
                #expect(await eventually { hook.received.count >= 1 }, "\(relay.output.suffix(1500))")
                let read = try await PythonPeer.run(
                    script: "read_page.py", arguments: ["http://127.0.0.1:\(port)/"], input: "")
                let page = try #require(
                    try JSONSerialization.jsonObject(with: Data(read.output.utf8)) as? [String: Any], "\(read.output)")
                let shown = page["children"] as? [[String: Any]] ?? []
                #expect(shown.count == children.count, "\(page)")
                let aliceShown = try #require(shown.first { $0["name"] as? String == "Alice" }, "\(page)")
                let money = String(format: "$%.2f", NSDecimalNumber(decimal: balance).doubleValue)
                #expect(aliceShown["balance"] as? String == money, "\(aliceShown)")
                let goals = aliceShown["goals"] as? [[String: Any]] ?? []
                #expect(goals.count == 1 && goals.first?["progress"] as? Int == 50, "\(goals)")
                #expect(
                    (goals.first?["text"] as? String)?.contains("Bike <helmet>") == true,
                    "the name is text, not markup: \(goals)")
                #expect(
                    (aliceShown["chart"] as? [NSNumber])?.map(\.intValue) == [1, 640, 320],
                    "the browser decoded the week's chart: \(aliceShown)")
                #expect((page["alerts"] as? [String])?.first?.contains("transaction.created") == true, "\(page)")
                #expect(page["sinks"] as? [String] == ["hook working"], "\(page)")
                await relay.expectCleanStop()
            }
        }
    }
}
