import AllowanceAPI
import Foundation
import SignalRProtocol
import Store
import TestSupport
import Testing

/// `allowance-relay summary show`: the period under way, now, as the binary prints it from a real database.
@Suite(.serialized) struct SummaryShowTests {
    let dir = FileManager.default.temporaryDirectory.appending(path: "relay-summary-\(UUID())")

    func seeded(rules: String) throws -> (config: String, env: [String: String]) {
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let db = dir.appending(path: "relay.sqlite").path
        let store = try Store.open(path: db)
        let alice = UUID()
        let now = Date()
        func t(_ amount: String, _ type: TransactionType, _ after: String, _ at: Date) -> Transaction {
            Transaction(
                id: UUID(), childId: alice, amount: Decimal(string: amount)!, type: type, description: "x",
                balanceAfter: Decimal(string: after)!,
                createdAt: at, createdByName: "Pat")
        }
        try store.storeCaughtUp(
            children: [
                Child(
                    id: alice, firstName: "Alice", lastName: "E", weeklyAllowance: 10,
                    currentBalance: Decimal(string: "33.50")!),
                Child(id: UUID(), firstName: "Bob", lastName: "E", weeklyAllowance: 5, currentBalance: 3),
            ],
            transactions: [
                t("9.00", .credit, "30.00", now.addingTimeInterval(-3 * 86400)),  // days ago: in no period of today
                t("5.00", .credit, "35.00", now.addingTimeInterval(-2)),
                t("1.50", .debit, "33.50", now.addingTimeInterval(-1)),
            ])
        let file = dir.appending(path: "relay.yaml").path
        try "relay:\n  time_zone: UTC\nsinks:\n  chat: slack://T/B/X\n\(rules)".write(
            toFile: file, atomically: true, encoding: .utf8)
        return (file, ["ALLOWANCE_RELAY_STORE_PATH": db])
    }

    @Test func itPrintsEachChildsPeriodSoFar() async throws {
        // A rule due at the minute just past: its period began then, so only today's two transactions count.
        let minute = Calendar(identifier: .gregorian).dateComponents(
            in: TimeZone(identifier: "UTC")!, from: Date().addingTimeInterval(-3600))
        let at = String(format: "%02d:%02d", minute.hour!, minute.minute!)
        let (file, env) = try seeded(rules: "rules:\n  - name: evening\n    summary: daily at \(at)\n    to: chat\n")
        let p = try RelayProcess(env: env, arguments: ["summary", "show", "--config", file, "--child", "alice"])
        #expect(await p.wait() == 0, "\(p.output)")
        #expect(
            p.output
                == "Alice, today so far: 2 transactions, $5.00 in, $1.50 out (savings rate 70.00%). Balance $33.50.\n",
            "\(p.output)")
        let all = try RelayProcess(env: env, arguments: ["summary", "show", "--config", file, "--json"])
        #expect(await all.wait() == 0)
        let json = try JSONValue(parsing: Array(all.output.utf8))
        #expect(json.arrayValue?.count == 2 && json.arrayValue?.first?["kind"] == "summary", "\(all.output)")
    }

    /// `--chart`: the child's balance over the period as a PNG, read back with Pillow: the balance line rises from
    /// left to right (30.00 before the period's transactions, 33.50 now) and the goal still to buy (a 40.00 helmet)
    /// is drawn above it; the bought one (60.00) is not drawn.
    @Test func theChartShowsTheBalanceOverThePeriodAndTheGoalsStillToBuy() async throws {
        try #require(PythonPeer.available)
        let minute = Calendar(identifier: .gregorian).dateComponents(
            in: TimeZone(identifier: "UTC")!, from: Date().addingTimeInterval(-3600))
        let at = String(format: "%02d:%02d", minute.hour!, minute.minute!)
        let (file, env) = try seeded(rules: "rules:\n  - name: evening\n    summary: daily at \(at)\n    to: chat\n")
        // Cara's transactions fall inside the period, 40 and 20 minutes ago: the line moves within the picture.
        let store = try Store.open(path: env["ALLOWANCE_RELAY_STORE_PATH"]!)
        let cara = UUID()
        let now = Date()
        try store.storeCaughtUp(
            children: [Child(id: cara, firstName: "Cara", lastName: "E", weeklyAllowance: 5, currentBalance: 33.5)],
            transactions: [
                Transaction(
                    id: UUID(), childId: cara, amount: 5, type: .credit, description: "x", balanceAfter: 35,
                    createdAt: now.addingTimeInterval(-2400), createdByName: "Pat"),
                Transaction(
                    id: UUID(), childId: cara, amount: 1.5, type: .debit, description: "x", balanceAfter: 33.5,
                    createdAt: now.addingTimeInterval(-1200), createdByName: "Pat"),
            ])
        try store.storeWishList(
            child: cara,
            items: [
                WishListItem(id: UUID(), childId: cara, name: "helmet", price: 40),
                WishListItem(id: UUID(), childId: cara, name: "kite", price: 60, isPurchased: true),
            ])
        let png = dir.appending(path: "alice.png").path
        let p = try RelayProcess(
            env: env, arguments: ["summary", "show", "--config", file, "--child", "Cara", "--chart", png])
        #expect(await p.wait() == 0, "\(p.output)")
        let read = try await PythonPeer.run(script: "read_chart.py", arguments: [png], input: "")
        let seen = try #require(
            try JSONSerialization.jsonObject(with: Data(read.output.utf8)) as? [String: Any], "\(read.output)")
        #expect(seen["format"] as? String == "PNG" && seen["size"] as? [Int] == [640, 320], "\(seen)")
        let left = try #require((seen["balance_left"] as? [Int])?.first, "\(seen)")
        let right = try #require((seen["balance_right"] as? [Int])?.first, "\(seen)")
        #expect(right < left, "33.50 at the end is drawn above 30.00 at the start: \(seen)")
        let goals = seen["goals"] as? [Int] ?? []
        #expect(goals.count == 1 && goals[0] < right, "one goal (the helmet, 40.00) above the balance: \(seen)")
        let without = try RelayProcess(env: env, arguments: ["summary", "show", "--config", file, "--chart", png])
        #expect(await without.wait() == 64 && without.output.contains("--child"), "\(without.output)")
    }

    @Test func aRuleOrAChildThatIsNotThereIsNamed() async throws {
        let (file, env) = try seeded(rules: "")
        let rule = try RelayProcess(env: env, arguments: ["summary", "show", "--config", file, "--rule", "nightly"])
        #expect(await rule.wait() == 65)
        #expect(rule.output.contains("No summary rule 'nightly': the configuration has none"), "\(rule.output)")
        let child = try RelayProcess(env: env, arguments: ["summary", "show", "--config", file, "--child", "Dave"])
        #expect(await child.wait() == 65)
        #expect(child.output.contains("the children are Alice and Bob"), "\(child.output)")
    }
}
