import Alerts
import AllowanceAPI
import Config
import Foundation
import HTTPTransport
import Relay
import SignalRProtocol
import Store
import TestSupport
import Testing

/// The generic webhook's body is what `docs/webhook.schema.json` documents, for every kind of alert, checked by the
/// reference JSON Schema validator: money as exact strings with the currency, a digest with its transactions.
@Suite struct WebhookSchemaTests {
    @Test func everyKindOfAlertMatchesTheDocumentedSchema() async throws {
        let config = try AlertSettings.parse(
            "relay:\n  currency: EUR\nsinks:\n  hook:\n    type: webhook\n    url: http://127.0.0.1:9/h\n",
            file: "t.yaml")
        let sink = try #require(makeSink(config.sinks[0]) as? HTTPSink)
        let t1 = transaction("26.00", after: "4.50", description: "Lego set")
        var t2 = transaction("0.05", .credit, after: "4.55")
        t2.id = UUID()
        let now = Date()
        let events: [RelayEvent] = [
            created(t1, previous: "30.50"),
            RelayEvent(
                kind: .balanceUpdated, at: now, childId: alice, childName: "Alice", balance: 4.5,
                previousBalance: Decimal(string: "30.5")!),
            RelayEvent(
                kind: .balanceLow, at: now, childId: alice, childName: "Alice", balance: 4.5, previousBalance: 30),
            RelayEvent(
                kind: .digest, at: now, childId: alice, childName: "Alice", balance: Decimal(string: "4.55")!,
                caughtUp: true,
                detail: "While the relay was offline", count: 2, total: Decimal(string: "-25.95")!,
                transactions: [t1, t2]),
            RelayEvent(
                kind: .outboxRejected, at: now, childId: alice, childName: "Alice", transaction: t1, detail: "HTTP 400"),
            RelayEvent(
                kind: .outboxDead, at: now, childId: alice, childName: "Alice", transaction: t1, detail: "gave up"),
            RelayEvent(kind: .connectionLost, at: now, detail: "no connection for 5 minutes"),
            RelayEvent(kind: .deliveryDisabled, at: now, detail: "HTTP 410", sink: "chat"),
            RelayEvent(kind: .test, at: now, sink: "hook"),
            RelayEvent(kind: .syncConflict, at: now, detail: "The server no longer has a transaction the cache holds"),
            RelayEvent(kind: .syncRejected, at: now, childId: alice, childName: "Alice", detail: "an amount of 0"),
            { () -> RelayEvent in
                var e = RelayEvent(
                    kind: .summary, at: now, childId: alice, childName: "Alice", balance: Decimal(string: "4.55")!,
                    detail: "daily at 19:00",
                    count: 2, total: Decimal(string: "-25.95")!, transactions: [t1, t2])
                e.from = now.addingTimeInterval(-86400)
                e.goals = [Goal(id: UUID(), name: "Kite", price: 20, progress: 22)]
                return e
            }(),
            { () -> RelayEvent in
                var e = RelayEvent(kind: .goalReached, at: now, childId: alice, childName: "Alice", balance: 31)
                e.goal = Goal(id: UUID(), name: "Bike helmet", price: 30, url: "https://shop.example/h", progress: 100)
                return e
            }(),
            { () -> RelayEvent in
                var e = RelayEvent(kind: .goalPurchased, at: now, childId: alice, childName: "Alice", balance: 1)
                e.goal = Goal(id: UUID(), name: "Bike helmet", price: Decimal(string: "29.99")!, progress: 100)
                return e
            }(),
            { () -> RelayEvent in
                var e = RelayEvent(
                    kind: .digest, at: now, childId: alice, childName: "Alice", balance: Decimal(string: "4.55")!,
                    caughtUp: true,
                    detail: "Before the relay started", count: 2, total: Decimal(string: "-25.95")!,
                    transactions: [t1, t2])
                e.history = true
                return e
            }(),
        ]
        // Every kind a webhook can be sent (a recovered balance only takes back a popup).
        #expect(Set(events.map(\.kind)) == Set(RelayEvent.Kind.allCases).subtracting([.balanceRecovered]))
        var lines: [String] = []
        for e in events {
            let m = config.message(
                id: "dlv_x", kind: e.kind, urgency: .normal, event: e, sink: config.sinks[0], markup: false)
            lines.append(String(decoding: sink.request(for: m).body, as: UTF8.self))
        }
        let digest = try JSONValue(parsing: Array(lines[3].utf8))["data"]
        #expect(digest?["currency"] == "EUR" && digest?["total"] == "-25.95")
        let folded = digest?["transactions"]?.arrayValue ?? []
        #expect(folded.count == 2 && folded.last?["amount"] == "0.05", "the digest carries each transaction it folds")
        let first = try JSONValue(parsing: Array(lines[0].utf8))
        #expect(first["data"]?["previousBalance"] == "30.50")
        try #require(PythonPeer.available, "the Python venv with jsonschema (make test makes it)")
        let schema = PythonPeer.root.appending(path: "docs/webhook.schema.json").path
        let result = try await PythonPeer.run(
            script: "validate_json_schema.py", arguments: [schema], input: lines.joined(separator: "\n") + "\n")
        #expect(result.status == 0, "\(result.output)")
        #expect(result.output.split(separator: "\n").count == events.count)
        // And the validator does reject what the relay used to send: an amount as a JSON number.
        let old = lines[0].replacingOccurrences(of: #""amount":"26.00""#, with: #""amount":26"#)
        #expect(old != lines[0])
        let refused = try await PythonPeer.run(
            script: "validate_json_schema.py", arguments: [schema], input: old + "\n")
        #expect(refused.status == 1 && refused.output.contains("amount"), "\(refused.output)")
    }
}
