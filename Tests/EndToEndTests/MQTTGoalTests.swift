import Foundation
import TestSupport
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

extension MQTTSinkTests {
    /// A goal on Alice's wish list becomes a progress sensor on her device once the relay has read the list, and its
    /// progress follows her balance. Read from the broker with paho-mqtt and Foundation's JSON.
    @Test func eachGoalIsAProgressSensorOnTheChildsDevice() async throws {
        try #require(PythonPeer.available)
        let broker = try await MosquittoBroker()
        defer { broker.stop() }
        let (file, storePath) = try config(broker)
        let alice = "11111111-1111-4111-8111-111111111111"
        func json(_ text: String?) -> [String: Any] {
            (try? JSONSerialization.jsonObject(with: Data((text ?? "").utf8)) as? [String: Any]) ?? [:]
        }
        try await withSim { base in
            let balance = try #require(
                ((try await simREST(base, "GET", "/api/v1/children/\(alice)").json as? [String: Any])?["currentBalance"]
                    as? NSNumber))
            // Priced so that the balance is half of it, whatever the simulator's family starts with.
            let price = balance.decimalValue * 2
            let item =
                try await simREST(
                    base, "POST", "/api/v1/wishlist",
                    ["childId": alice, "name": "Scooter", "price": NSDecimalNumber(decimal: price)]
                ).json as? [String: Any] ?? [:]
            let itemId = try #require(item["id"] as? String).lowercased()
            let (relay, _) = try await startRelay(base, file, storePath)
            let sensorKey = "goal_" + Self.object(itemId)
            var device: [String: Any] = [:]
            #expect(
                await eventually(.seconds(20)) {
                    device = json((try? await retained(broker))?[Self.deviceTopic(alice)])
                    return (device["components"] as? [String: Any])?[sensorKey] != nil
                }, "\(relay.output.suffix(2000))")
            let sensor = (device["components"] as? [String: Any])?[sensorKey] as? [String: Any] ?? [:]
            #expect(sensor["platform"] as? String == "sensor" && sensor["unit_of_measurement"] as? String == "%")
            #expect(sensor["name"] as? String == "Goal: Scooter")
            #expect(sensor["state_topic"] as? String == "allowance/child/\(alice)/goals")
            func progress() async -> Int? {
                let goals = json((try? await retained(broker))?["allowance/child/\(alice)/goals"])
                return ((goals[itemId] as? [String: Any])?["progress"] as? NSNumber)?.intValue
            }
            #expect(await progress() == 50)
            _ = try await simREST(
                base, "POST", "/api/v1/transactions",
                [
                    "childId": alice, "amount": NSDecimalNumber(decimal: price - balance.decimalValue),
                    "type": "Credit", "description": "gift",
                ])
            #expect(await eventually(.seconds(20)) { await progress() == 100 }, "\(relay.output.suffix(2000))")
            await relay.expectCleanStop()
        }
    }
}
