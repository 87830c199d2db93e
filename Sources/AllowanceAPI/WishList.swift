import Core
import Foundation

/// An item on a child's wish list (`GET /api/v1/wishlist/children/{childId}`): something the child saves for.
/// `canAfford` is the server's view when it answered; the relay works it out from its own balance instead.
public struct WishListItem: Sendable, Equatable {
    public var id: UUID
    public var childId: UUID
    public var name: String
    public var price: Decimal
    public var url: String?
    public var notes: String?
    public var isPurchased: Bool
    public var purchasedAt: Date?

    public init(
        id: UUID, childId: UUID, name: String, price: Decimal, url: String? = nil, notes: String? = nil,
        isPurchased: Bool = false, purchasedAt: Date? = nil
    ) {
        self.id = id
        self.childId = childId
        self.name = name
        self.price = price
        self.url = url
        self.notes = notes
        self.isPurchased = isPurchased
        self.purchasedAt = purchasedAt
    }
}

extension WishListItem {
    public init(json: JSONValue) throws(APIError) {
        let f = Fields(json, what: "wish list item")
        id = try f.uuid("id")
        childId = try f.uuid("childId")
        name = SafeText.stored(try f.string("name"), limit: SafeText.maxName)
        price = try f.money("price")
        guard price > 0, Money.minorUnits(price) != nil else {
            throw APIError(.invalidPayload, "wish list item.price must be above 0 with at most two decimals.")
        }
        url = (try? f.string("url")).map { SafeText.stored($0, limit: SafeText.maxDescription) }
        notes = (try? f.string("notes")).map { SafeText.stored($0, limit: SafeText.maxDescription) }
        isPurchased = (try? f.field("isPurchased"))?.boolValue ?? false
        purchasedAt = try? f.date("purchasedAt")
    }
}

extension APIClient {
    /// A child's wish list. Items that cannot be read are left out and named in `unreadable` (one bad row does not
    /// hide the others).
    public func wishList(child: UUID) async throws(APIError) -> (items: [WishListItem], unreadable: [String]) {
        let path = "api/v1/wishlist/children/\(child.lowercased)"
        let json = try await get(path)
        guard case .array(let rows) = json else {
            throw APIError(.invalidResponse, "GET /\(path) did not return an array.")
        }
        var items: [WishListItem] = []
        var unreadable: [String] = []
        for row in rows {
            do throws(APIError) {
                let item = try WishListItem(json: row)
                // An item of another child in this child's list is the server's mistake: not this child's goal.
                guard item.childId == child else {
                    unreadable.append("\(item.id.lowercased): childId is another child's")
                    continue
                }
                items.append(item)
            } catch {
                unreadable.append("\(row["id"]?.stringValue ?? "an item"): \(error.message)")
            }
        }
        return (items, unreadable)
    }
}
