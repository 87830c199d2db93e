import Foundation
import Store
import TestSupport
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The wish list as a family meets it: the real binary, the simulator's REST wish list, a real webhook receiver. A
/// credit that reaches an item's price says so once; buying it in the app says so once. The oracle is the receiver's
/// bodies, read with Foundation's JSON.
@Suite(.serialized, .timeLimit(.minutes(2))) struct GoalEndToEndTests {
    static let alice = "11111111-1111-4111-8111-111111111111"

    /// The goal alerts the receiver took, as "kind name price progress".
    func goalAlerts(_ hook: WebhookReceiver) -> [String] {
        hook.received.compactMap { r -> String? in
            guard let body = try? JSONSerialization.jsonObject(with: Data(r.body)) as? [String: Any],
                let data = body["data"] as? [String: Any], let goal = data["goal"] as? [String: Any]
            else { return nil }
            return "\(body["type"] ?? "") \(goal["name"] ?? "") \(goal["price"] ?? "") \(goal["progress"] ?? "")"
        }
    }

    @Test func aCreditReachingAnItemAndItsPurchaseAreEachSaidOnce() async throws {
        let hook = WebhookReceiver()
        try await hook.run { hookURL in
            try await withSim { base in
                let (_, child) = try await simREST(base, "GET", "/api/v1/children/\(Self.alice)")
                let balance = try #require(((child as? [String: Any])?["currentBalance"] as? NSNumber)?.doubleValue)
                let (created, item) = try await simREST(
                    base, "POST", "/api/v1/wishlist",
                    [
                        "childId": Self.alice, "name": "Bike helmet", "price": balance + 5,
                        "url": "https://shop.example/h",
                    ])
                #expect(created == 201 || created == 200)
                let itemId = try #require((item as? [String: Any])?["id"] as? String)
                let dir = FileManager.default.temporaryDirectory.appending(path: "relay-goals-\(UUID())")
                try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
                let config = dir.appending(path: "relay.yaml").path
                try """
                sinks:
                  hook:
                    type: webhook
                    url: \(hookURL.absoluteString)/goals
                rules:
                  - event: [goal.reached, goal.purchased]
                    to: hook
                """.write(toFile: config, atomically: true, encoding: .utf8)
                let storePath = dir.appending(path: "relay.sqlite").path
                let relay = try RelayProcess(
                    env: simRelayEnv(base, store: storePath), arguments: ["run", "--config", config])
                #expect(await relay.waitFor("caught up"))
                // Waits (not the oracle) for the first read of the list: the starting point, which alerts nothing.
                #expect(await eventually { (try? Store.open(path: storePath).goals(child: nil).count) == 1 })
                let (credited, _) = try await simREST(
                    base, "POST", "/api/v1/transactions",
                    ["childId": Self.alice, "amount": 5, "type": "Credit", "description": "birthday"])
                #expect(credited == 201 || credited == 200)
                #expect(await eventually { goalAlerts(hook).count >= 1 }, "\(relay.output.suffix(1500))")
                let (bought, _) = try await simREST(base, "POST", "/api/v1/wishlist/\(itemId)/purchase")
                #expect(bought == 200)
                #expect(await eventually { goalAlerts(hook).count >= 2 }, "\(relay.output.suffix(1500))")
                // Nothing left to send: a second alert of either would have gone by now.
                #expect(await ledgerSettled(try Store.open(path: storePath)))
                let price = String(format: "%.2f", balance + 5)
                #expect(
                    goalAlerts(hook) == [
                        "goal.reached Bike helmet \(price) 100", "goal.purchased Bike helmet \(price) 100",
                    ])
                await relay.expectCleanStop()
                // What a parent's script reads: the item bought, with its price.
                let cli = try RelayProcess(
                    env: simRelayEnv(base, store: storePath),
                    arguments: ["goals", "--all", "--json", "--config", config])
                #expect(await cli.wait() == 0, "\(cli.output)")
                let listed = try JSONSerialization.jsonObject(with: Data(cli.output.utf8)) as? [[String: Any]]
                #expect(listed?.count == 1, "\(cli.output)")
                #expect(
                    listed?.first?["name"] as? String == "Bike helmet" && listed?.first?["price"] as? String == price)
                #expect(listed?.first?["state"] as? String == "bought" && listed?.first?["child"] as? String == "Alice")
            }
        }
    }
}
