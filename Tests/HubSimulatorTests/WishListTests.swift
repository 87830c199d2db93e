import Foundation
import TestSupport
import Testing

@testable import HubSimulator

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The seeds' wish list and analytics as the simulator serves them, read with Foundation's JSON parser; the analytics
/// are checked against the child's transactions as `GET /children/{id}/transactions` lists them, summed here.
@Suite struct WishListTests {
    static let token = "wish-test-token"
    static let alice = "11111111-1111-4111-8111-111111111111"

    /// (status, parsed body) of one request with the token.
    func call(_ base: URL, _ method: String, _ path: String, _ body: [String: Any]? = nil) async throws -> (Int, Any?) {
        try await simREST(base, method, path, body, token: Self.token)
    }

    func decimal(_ value: Any?) -> Decimal? { (value as? NSNumber).map { Decimal(string: $0.stringValue)! } }

    func balance(_ base: URL) async throws -> Decimal {
        let (_, child) = try await call(base, "GET", "/api/v1/children/\(Self.alice)")
        return try #require(decimal((child as? [String: Any])?["currentBalance"]))
    }

    @Test func anItemIsAddedEditedListedAndDeletedWithCanAffordFromTheBalance() async throws {
        try await withSimulator(token: Self.token) { base in
            // Alice starts with 25.50.
            let (created, cheap) = try await call(
                base, "POST", "/api/v1/wishlist",
                ["childId": Self.alice, "name": "Stickers", "price": 4.5, "url": "https://example.org/s"])
            #expect(created == 201)
            let item = try #require(cheap as? [String: Any])
            #expect(item["name"] as? String == "Stickers" && decimal(item["price"]) == Decimal(string: "4.5"))
            #expect(item["canAfford"] as? Bool == true && item["isPurchased"] as? Bool == false)
            #expect(item["notes"] is NSNull && item["purchasedAt"] is NSNull)
            let (_, dear) = try await call(
                base, "POST", "/api/v1/wishlist", ["childId": Self.alice, "name": "Bike helmet", "price": 39.99])
            #expect((dear as? [String: Any])?["canAfford"] as? Bool == false)
            let id = try #require(item["id"] as? String)
            let (edited, after) = try await call(
                base, "PUT", "/api/v1/wishlist/\(id)", ["name": "Sticker album", "price": 30, "notes": "the big one"])
            #expect(edited == 200)
            #expect((after as? [String: Any])?["canAfford"] as? Bool == false)
            #expect((after as? [String: Any])?["notes"] as? String == "the big one")
            let (_, list) = try await call(base, "GET", "/api/v1/wishlist/children/\(Self.alice)")
            #expect((list as? [[String: Any]])?.map { $0["name"] as? String } == ["Sticker album", "Bike helmet"])
            #expect(try await call(base, "DELETE", "/api/v1/wishlist/\(id)").0 == 204)
            #expect(try await call(base, "GET", "/api/v1/wishlist/\(id)").0 == 404)
            #expect(try await call(base, "DELETE", "/api/v1/wishlist/\(id)").0 == 404)
        }
    }

    @Test func aBodyTheAPIWouldRefuseIsA400AndAnUnknownChildA404() async throws {
        try await withSimulator(token: Self.token) { (base: URL) async throws in
            for body: [String: Any] in [
                ["childId": Self.alice, "name": "x", "price": 0], ["childId": Self.alice, "name": "x", "price": 1.005],
                ["childId": Self.alice, "price": 3], ["childId": Self.alice, "name": " ", "price": 3],
                ["childId": "not-a-uuid", "name": "x", "price": 3], ["childId": Self.alice, "name": "x", "price": "3"],
            ] {
                #expect(try await call(base, "POST", "/api/v1/wishlist", body).0 == 400, "\(body)")
            }
            let stranger = "99999999-9999-4999-8999-999999999999"
            #expect(
                try await call(base, "POST", "/api/v1/wishlist", ["childId": stranger, "name": "x", "price": 3]).0
                    == 404)
            #expect(try await call(base, "GET", "/api/v1/wishlist/children/\(stranger)").0 == 404)
            #expect(
                try await call(base, "GET", "/api/v1/analytics/children/\(Self.alice)/balance-history?days=0").0 == 400)
        }
    }

    @Test func aPurchaseDebitsThePriceOnceAndOneTheChildCannotPayChangesNothing() async throws {
        try await withSimulator(token: Self.token) { base in
            let (_, made) = try await call(
                base, "POST", "/api/v1/wishlist", ["childId": Self.alice, "name": "Comic", "price": 7.25])
            let id = try #require((made as? [String: Any])?["id"] as? String)
            let before = try await balance(base)
            let (bought, item) = try await call(base, "POST", "/api/v1/wishlist/\(id)/purchase")
            #expect(bought == 200)
            #expect((item as? [String: Any])?["isPurchased"] as? Bool == true)
            #expect((item as? [String: Any])?["purchasedAt"] is String)
            #expect(try await balance(base) == before - Decimal(string: "7.25")!)
            let (_, page) = try await call(base, "GET", "/api/v1/children/\(Self.alice)/transactions?limit=1")
            let newest = try #require((page as? [[String: Any]])?.first)
            #expect(newest["type"] as? String == "Debit" && newest["description"] as? String == "Bought Comic")
            #expect(decimal(newest["amount"]) == Decimal(string: "7.25"))
            // Bought already: refused, and no second debit.
            #expect(try await call(base, "POST", "/api/v1/wishlist/\(id)/purchase").0 == 400)
            #expect(try await balance(base) == before - Decimal(string: "7.25")!)

            let (_, dear) = try await call(
                base, "POST", "/api/v1/wishlist", ["childId": Self.alice, "name": "Bike", "price": 500])
            let dearId = try #require((dear as? [String: Any])?["id"] as? String)
            #expect(try await call(base, "POST", "/api/v1/wishlist/\(dearId)/purchase").0 == 400)
            let (_, still) = try await call(base, "GET", "/api/v1/wishlist/\(dearId)")
            #expect((still as? [String: Any])?["isPurchased"] as? Bool == false)
            #expect(try await balance(base) == before - Decimal(string: "7.25")!)
        }
    }

    @Test func theAnalyticsAgreeWithTheTransactionsTheAPIlists() async throws {
        try await withSimulator(token: Self.token) { base in
            let moves: [(String, Double, String)] = [
                ("Credit", 10, "Weekly allowance"), ("Debit", 2.5, "Ice cream"), ("Debit", 1.25, "Ice cream"),
                ("Debit", 4, "Bus fare"), ("Credit", 3, "Chores"),
            ]
            for (type, amount, description) in moves {
                let body: [String: Any] = [
                    "childId": Self.alice, "amount": amount, "type": type, "description": description,
                ]
                #expect(try await call(base, "POST", "/api/v1/transactions", body).0 == 201)
            }
            let (_, page) = try await call(base, "GET", "/api/v1/children/\(Self.alice)/transactions?limit=500")
            let listed = try #require(page as? [[String: Any]])
            func sum(_ type: String) -> Decimal {
                listed.filter { $0["type"] as? String == type }.reduce(Decimal(0)) { $0 + decimal($1["amount"])! }
            }
            let income = sum("Credit")
            let spending = sum("Debit")
            let (_, summaryBody) = try await call(
                base, "GET", "/api/v1/analytics/children/\(Self.alice)/income-spending")
            let summary = try #require(summaryBody as? [String: Any])
            #expect(decimal(summary["totalIncome"]) == income && decimal(summary["totalSpending"]) == spending)
            #expect(decimal(summary["netSavings"]) == income - spending)
            #expect(
                (summary["incomeTransactionCount"] as? Int) == listed.filter { $0["type"] as? String == "Credit" }.count
            )
            // 13 in, 7.75 out: 40.38% kept (5.25 / 13 = 0.403846...).
            #expect(income == 13 && decimal(summary["savingsRate"]) == Decimal(string: "40.38"))

            let (_, breakdownBody) = try await call(
                base, "GET", "/api/v1/analytics/children/\(Self.alice)/spending-breakdown")
            let breakdown = try #require(breakdownBody as? [[String: Any]])
            #expect(breakdown.map { $0["category"] as? String } == ["Bus fare", "Ice cream"])
            #expect(breakdown.map { decimal($0["amount"]) } == [4, Decimal(string: "3.75")])
            #expect(breakdown.map { $0["transactionCount"] as? Int } == [1, 2])

            let (_, historyBody) = try await call(
                base, "GET", "/api/v1/analytics/children/\(Self.alice)/balance-history?days=7")
            let history = try #require(historyBody as? [[String: Any]])
            let oldestFirst = listed.reversed().map { decimal($0["balanceAfter"]) }
            #expect(history.map { decimal($0["balance"]) } == oldestFirst)
            #expect(history.last?["transactionDescription"] as? String == "Chores")

            let (_, monthsBody) = try await call(
                base, "GET", "/api/v1/analytics/children/\(Self.alice)/monthly-comparison?months=3")
            let months = try #require(monthsBody as? [[String: Any]])
            #expect(months.count == 3)
            let now = Calendar(identifier: .gregorian).dateComponents(in: TimeZone(identifier: "UTC")!, from: Date())
            #expect(months.last?["month"] as? Int == now.month && months.last?["year"] as? Int == now.year)
            #expect(decimal(months.last?["income"]) == income && decimal(months.last?["spending"]) == spending)
            #expect(decimal(months.last?["endingBalance"]) == decimal(listed.first?["balanceAfter"]))
            // The months before had no transactions: they end at the balance Alice started with.
            #expect(decimal(months.first?["endingBalance"]) == Decimal(string: "25.50"))
            #expect(decimal(months.first?["income"]) == 0)
        }
    }

    /// The wish list is part of the family a state file keeps: a restarted simulator has it, bought or not.
    @Test func theWishListIsKeptInTheStateFile() async throws {
        let file = FileManager.default.temporaryDirectory.appending(path: "wish-\(UUID()).json").path
        defer { try? FileManager.default.removeItem(atPath: file) }
        let alice = UUID(uuidString: Self.alice)!
        let first = FamilyStore(seed: 7, stateFile: file)
        let item = try await first.addWishItem(
            childId: alice, WishItemFields(name: "Kite", price: Decimal(string: "12.00")!, url: nil, notes: "red"))
        _ = try await first.markPurchased(item.id, at: Date())
        let again = FamilyStore(seed: 7, stateFile: file)
        let kept = try await again.wishItems(of: alice)
        #expect(kept.map(\.name) == ["Kite"] && kept.first?.isPurchased == true && kept.first?.notes == "red")
    }
}
