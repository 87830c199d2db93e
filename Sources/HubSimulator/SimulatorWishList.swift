import Foundation
import Hummingbird

/// The seeds' wish list (`/api/v1/wishlist/...`) and analytics (`/api/v1/analytics/children/{id}/...`), behind the
/// same token and fault switches as the rest of the REST API. The hub has no wish-list event: a purchase is seen as
/// the debit it makes (TransactionCreated, BalanceUpdated).
extension HubSimulator {
    func wishListAndAnalyticsRoutes(_ api: RouterGroup<BasicRequestContext>) {
        api.get("wishlist/children/:id") { request, context in
            try await self.answer(request) { () throws(APIFailure) in
                let items = try await self.family.wishItems(of: try Self.id(context))
                return .array(await self.values(items))
            }
        }
        api.get("wishlist/:id") { request, context in
            try await self.answer(request) { () throws(APIFailure) in
                await self.value(try await self.family.wishItem(try Self.id(context)))
            }
        }
        api.post("wishlist") { request, context in
            try await self.answer(request, status: 201) { () throws(APIFailure) in
                let body = try await self.body(request, context)
                guard let child = body["childId"]?.stringValue.flatMap(UUID.init(uuidString:)) else {
                    throw APIFailure(status: 400, message: "childId is required and must be a UUID.")
                }
                return await self.value(try await self.family.addWishItem(childId: child, try Self.fields(body)))
            }
        }
        api.put("wishlist/:id") { request, context in
            try await self.answer(request) { () throws(APIFailure) in
                let id = try Self.id(context)
                let fields = try Self.fields(try await self.body(request, context))
                return await self.value(try await self.family.updateWishItem(id, fields))
            }
        }
        api.delete("wishlist/:id") { request, context in
            try await self.respond(request) { () throws(APIFailure) in
                try await self.family.deleteWishItem(try Self.id(context))
                return Response(status: .noContent)
            }
        }
        // As the app does: the price is debited from the child (one debit, whatever the retries: the item's id is
        // the debit's idempotency key), then the item is marked bought.
        api.post("wishlist/:id/purchase") { request, context in
            try await self.answer(request) { () throws(APIFailure) in
                let item = try await self.family.wishItem(try Self.id(context))
                guard !item.isPurchased else {
                    throw APIFailure(status: 400, message: "\(item.name) is already purchased.")
                }
                let debit = try await self.createTransaction(
                    childId: item.childId, amount: item.price, type: "Debit", description: "Bought \(item.name)",
                    by: "Parent", idempotencyKey: "wishlist-purchase-\(item.id.uuidString)")
                return await self.value(try await self.family.markPurchased(item.id, at: debit.createdAt))
            }
        }
        let analytics = api.group("analytics/children/:id")
        analytics.get("balance-history") { request, context in
            try await self.answer(request) { () throws(APIFailure) in
                let days = try Self.count(request, "days", default: 30, max: 3650)
                return .array(try await self.family.balanceHistory(of: try Self.id(context), days: days))
            }
        }
        analytics.get("income-spending") { request, context in
            try await self.answer(request) { () throws(APIFailure) in
                try await self.family.incomeSpending(of: try Self.id(context))
            }
        }
        analytics.get("spending-breakdown") { request, context in
            try await self.answer(request) { () throws(APIFailure) in
                .array(try await self.family.spendingBreakdown(of: try Self.id(context)))
            }
        }
        analytics.get("monthly-comparison") { request, context in
            try await self.answer(request) { () throws(APIFailure) in
                let months = try Self.count(request, "months", default: 6, max: 120)
                return .array(try await self.family.monthlyComparison(of: try Self.id(context), months: months))
            }
        }
    }

    /// `body`'s value as JSON with `status`, behind the gate (`respond`).
    private func answer(
        _ request: Request, status: Int = 200, _ body: () async throws(APIFailure) -> SimValue
    ) async throws -> Response {
        try await respond(request) { () throws(APIFailure) in json(status, try await body()) }
    }

    /// The REST gate (token, down, faults), then `body`'s response, or its failure as a problem.
    private func respond(
        _ request: Request, _ body: () async throws(APIFailure) -> Response
    ) async throws -> Response {
        if let r = try await restGate(request) { return r }
        do throws(APIFailure) {
            return try await body()
        } catch {
            return problem(error.status, error.message)
        }
    }

    private func body(_ request: Request, _ context: BasicRequestContext) async throws(APIFailure) -> SimValue {
        do { return try await jsonBody(request, context) } catch {
            throw APIFailure(status: 400, message: "The body is not valid JSON.")
        }
    }

    private func value(_ item: SimWishItem) async -> SimValue {
        SimJSON.value(item, canAfford: await family.canAfford(item))
    }

    private func values(_ items: [SimWishItem]) async -> [SimValue] {
        var out: [SimValue] = []
        for item in items { out.append(await value(item)) }
        return out
    }

    private static func id(_ context: BasicRequestContext) throws(APIFailure) -> UUID {
        guard let id = UUID(uuidString: context.parameters.get("id") ?? "") else {
            throw APIFailure(status: 404, message: "Not found: the id is not a UUID.")
        }
        return id
    }

    private static func count(
        _ request: Request, _ name: String, default fallback: Int, max: Int
    ) throws(APIFailure)
        -> Int
    {
        guard let text = request.uri.queryParameters[Substring(name)] else { return fallback }
        guard let n = Int(text), (1...max).contains(n) else {
            throw APIFailure(status: 400, message: "\(name) must be a whole number from 1 to \(max).")
        }
        return n
    }

    private static func fields(_ body: SimValue) throws(APIFailure) -> WishItemFields {
        guard let name = body["name"]?.stringValue else {
            throw APIFailure(status: 400, message: "name is required.")
        }
        guard case .number(let price)? = body["price"] else {
            throw APIFailure(status: 400, message: "price is required and must be a JSON number.")
        }
        return WishItemFields(
            name: name, price: price, url: body["url"]?.stringValue, notes: body["notes"]?.stringValue)
    }
}

extension SimJSON {
    /// A wish-list item as the API returns it, with `canAfford` as of now.
    static func value(_ item: SimWishItem, canAfford: Bool) -> SimValue {
        [
            "id": .string(item.id.uuidString), "childId": .string(item.childId.uuidString),
            "name": .string(item.name), "price": .number(item.price), "url": item.url.map(SimValue.string) ?? .null,
            "notes": item.notes.map(SimValue.string) ?? .null, "isPurchased": .bool(item.isPurchased),
            "purchasedAt": item.purchasedAt.map(time) ?? .null, "createdAt": time(item.createdAt),
            "canAfford": .bool(canAfford),
        ]
    }
}
