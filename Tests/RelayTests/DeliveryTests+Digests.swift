import Alerts
import AllowanceAPI
import Config
import Foundation
import GRDB
import Logging
import Relay
import SignalRProtocol
import Store
import Synchronization
import TestSupport
import Testing

/// Catch-ups and quiet hours told as digests.
extension DeliveryTests {
    @Test func aCatchUpArrivesAsOneDigestPerChild() async throws {
        let chat = WebhookReceiver()
        try await withRelay("sinks:\n  chat:\n    type: slack\n    url: BASE_A/slack\n", chat) { store, engine in
            // +2 then four times -2, from 50: 52, 50, 48, 46, 44.
            let balances: [Decimal] = [52, 50, 48, 46, 44]
            var fetched: [Transaction] = []
            for (i, b) in balances.enumerated() {
                fetched.append(
                    Transaction(
                        id: UUID(), childId: alice, amount: 2, type: i == 0 ? .credit : .debit, description: "t\(i)",
                        balanceAfter: b,
                        createdAt: Date().addingTimeInterval(Double(i)), createdByName: "Pat"))
            }
            try store.storeCaughtUp(
                children: [
                    Child(id: alice, firstName: "Alice", lastName: "E", weeklyAllowance: 10, currentBalance: 44)
                ], transactions: fetched)
            await eventually("the digest") { chat.received.count >= 1 }
            try await settled(engine, store)
            #expect(chat.received.count == 1)
            let text = try JSONValue(parsing: chat.received[0].body)["text"]?.stringValue ?? ""
            #expect(text == "While the relay was offline: 5 transactions for Alice, -$6.00, balance $44.00.", "\(text)")
            #expect(try store.deliveries(state: .merged).count == 5)
            let digest = try #require(try store.deliveries(sink: "chat").first { $0.kind == .digest })
            #expect(
                try digest.event.transactions?.map(\.description) == ["t0", "t1", "t2", "t3", "t4"],
                "it carries what it folds, oldest first")
        }
    }

    /// What a catch-up found comes before the live alert that follows it, and the digest shows the balance as it is
    /// when it is sent (the live transaction moved it), not as its last folded transaction left it.
    @Test func aCatchUpsDigestComesBeforeTheLiveAlertAfterItWithTheBalanceOfNow() async throws {
        let chat = WebhookReceiver()
        try await withRelay("sinks:\n  chat:\n    type: slack\n    url: BASE_A/slack\n", chat) { store in
            let fetched = [(Decimal(52), TransactionType.credit), (Decimal(50), .debit)].enumerated().map { i, b in
                Transaction(
                    id: UUID(), childId: alice, amount: 2, type: b.1, description: "t\(i)", balanceAfter: b.0,
                    createdAt: Date().addingTimeInterval(Double(i) - 60), createdByName: "Pat")
            }
            try store.storeCaughtUp(
                children: [
                    Child(id: alice, firstName: "Alice", lastName: "E", weeklyAllowance: 10, currentBalance: 50)
                ], transactions: fetched)
            try live(store, "1.00", after: "49.00", "Ice cream")
            await eventually("two messages") { chat.received.count >= 2 }
            let texts = try chat.received.map { try JSONValue(parsing: $0.body)["text"]?.stringValue ?? "" }
            #expect(texts.count == 2)
            #expect(texts.first?.hasPrefix("While the relay was offline: 2 transactions for Alice") == true, "\(texts)")
            #expect(texts.first?.hasSuffix("balance $49.00.") == true, "the balance when shown: \(texts)")
            #expect(texts.last?.contains("Ice cream") == true, "\(texts)")
        }
    }

    /// Quiet hours hold a night's live transactions and perhaps a few a catch-up found after a short drop: the digest
    /// says "During quiet hours", not "While the relay was offline" (the relay was online).
    @Test func aQuietHoursDigestSaysSoEvenWithACaughtUpTransactionInIt() async throws {
        let chat = WebhookReceiver()
        let utc = TimeZone(identifier: "UTC")!
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = utc
        func hm(_ d: Date) -> String {
            String(format: "%02d:%02d", calendar.component(.hour, from: d), calendar.component(.minute, from: d))
        }
        let quiet = "\(hm(Date().addingTimeInterval(-300)))-\(hm(Date().addingTimeInterval(7200)))"
        let yaml =
            "relay:\n  time_zone: UTC\nsinks:\n  chat:\n    type: slack\n    url: BASE_A/slack\n    quiet_hours: \(quiet)\n"
        try await withRelay(yaml, chat) { store, engine in
            try live(store, "1.00", after: "49.00", "Ice cream")
            try live(store, "2.00", after: "47.00", "Stickers")
            let fetched = Transaction(
                id: UUID(), childId: alice, amount: 1, type: .debit, description: "Bus fare", balanceAfter: 46,
                createdAt: Date(), createdByName: "Pat")
            try store.storeCaughtUp(
                children: [
                    Child(id: alice, firstName: "Alice", lastName: "E", weeklyAllowance: 10, currentBalance: 46)
                ], transactions: [fetched])
            #expect(chat.received.isEmpty, "held by the quiet hours")
            // The quiet hours end now: the rows fall due, and a reload's new worker takes them at once.
            try await DatabaseQueue(path: store.path).write { db in
                try db.execute(
                    sql: "UPDATE delivery SET next_attempt_at = ? WHERE state = 'pending'",
                    arguments: [ISODate.string(Date())])
            }
            _ = engine.reload(engine.config)
            await eventually("the digest") { chat.received.count >= 1 }
            let text = try JSONValue(parsing: chat.received[0].body)["text"]?.stringValue ?? ""
            #expect(text.hasPrefix("During quiet hours: 3 transactions for Alice"), "\(text)")
        }
    }

    /// A machine behind the generic webhook books each transaction: a catch-up reaches it one by one, with ids.
    @Test func aCatchUpReachesTheGenericWebhookOneTransactionAtATime() async throws {
        let books = WebhookReceiver()
        try await withRelay("sinks:\n  books:\n    type: webhook\n    url: BASE_A/books\n", books) { store in
            let fetched = (0..<3).map { i in
                Transaction(
                    id: UUID(), childId: alice, amount: 1, type: .credit, description: "t\(i)",
                    balanceAfter: Decimal(51 + i),
                    createdAt: Date().addingTimeInterval(Double(i)), createdByName: "Pat")
            }
            try store.storeCaughtUp(
                children: [
                    Child(id: alice, firstName: "Alice", lastName: "E", weeklyAllowance: 10, currentBalance: 53)
                ], transactions: fetched)
            try await eventually("three delivered") { try store.deliveryCounts()["books"]?["delivered"] == 3 }
            // One webhook per transaction, each exactly once, none folded into a digest (a machine sink sends
            // several at a time: no order is promised).
            let ids = try books.received.map {
                try JSONValue(parsing: $0.body)["data"]?["transaction"]?["id"]?.stringValue ?? "none"
            }
            #expect(ids.sorted() == fetched.map { $0.id.uuidString.lowercased() }.sorted(), "\(ids)")
            #expect(try store.deliveries(state: .merged).isEmpty)
        }
    }
}
