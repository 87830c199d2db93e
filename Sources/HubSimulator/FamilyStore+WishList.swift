import Foundation

/// An item on a child's wish list, as the API keeps it (the seeds' `WishListItem` without `canAfford`, which is the
/// child's balance against the price at the moment it is read).
struct SimWishItem: Codable, Sendable {
    var id: UUID
    var childId: UUID
    var name: String
    var price: Decimal
    var url: String?
    var notes: String?
    var isPurchased: Bool
    var purchasedAt: Date?
    var createdAt: Date
}

/// What a new or edited item says: validated as the API validates a body.
struct WishItemFields: Sendable {
    var name: String
    var price: Decimal
    var url: String?
    var notes: String?

    func validated() throws(APIFailure) -> WishItemFields {
        let trimmed = name.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !trimmed.isEmpty, trimmed.count <= 200 else {
            throw APIFailure(status: 400, message: "name must be 1 to 200 characters.")
        }
        guard price > 0 else { throw APIFailure(status: 400, message: "price must be greater than 0.") }
        guard price.exponent >= -2 else {
            throw APIFailure(status: 400, message: "price has more than 2 decimal places.")
        }
        guard (url?.count ?? 0) <= 2000, (notes?.count ?? 0) <= 1000 else {
            throw APIFailure(status: 400, message: "url must be at most 2000 characters, notes at most 1000.")
        }
        return WishItemFields(name: trimmed, price: price, url: url, notes: notes)
    }
}

extension FamilyStore {
    /// A child's wish list, oldest first; 404 for a child the family does not have.
    func wishItems(of childId: UUID) throws(APIFailure) -> [SimWishItem] {
        guard child(childId) != nil else { throw APIFailure(status: 404, message: "Child \(childId) not found.") }
        return wishList.filter { $0.childId == childId }
    }

    func wishItem(_ id: UUID) throws(APIFailure) -> SimWishItem {
        guard let item = wishList.first(where: { $0.id == id }) else {
            throw APIFailure(status: 404, message: "Wish list item \(id) not found.")
        }
        return item
    }

    func addWishItem(childId: UUID, _ fields: WishItemFields) throws(APIFailure) -> SimWishItem {
        guard child(childId) != nil else { throw APIFailure(status: 404, message: "Child \(childId) not found.") }
        let f = try fields.validated()
        let item = SimWishItem(
            id: random.uuid(), childId: childId, name: f.name, price: f.price, url: f.url, notes: f.notes,
            isPurchased: false, purchasedAt: nil, createdAt: Date())
        wishList.append(item)
        save()
        return item
    }

    func updateWishItem(_ id: UUID, _ fields: WishItemFields) throws(APIFailure) -> SimWishItem {
        guard let i = wishList.firstIndex(where: { $0.id == id }) else {
            throw APIFailure(status: 404, message: "Wish list item \(id) not found.")
        }
        let f = try fields.validated()
        wishList[i].name = f.name
        wishList[i].price = f.price
        wishList[i].url = f.url
        wishList[i].notes = f.notes
        save()
        return wishList[i]
    }

    func deleteWishItem(_ id: UUID) throws(APIFailure) {
        guard wishList.contains(where: { $0.id == id }) else {
            throw APIFailure(status: 404, message: "Wish list item \(id) not found.")
        }
        wishList.removeAll { $0.id == id }
        save()
    }

    /// Marks an item bought by the debit `transaction` (made first, through the family's ledger).
    func markPurchased(_ id: UUID, at date: Date) throws(APIFailure) -> SimWishItem {
        guard let i = wishList.firstIndex(where: { $0.id == id }) else {
            throw APIFailure(status: 404, message: "Wish list item \(id) not found.")
        }
        if !wishList[i].isPurchased {
            wishList[i].isPurchased = true
            wishList[i].purchasedAt = date
            save()
        }
        return wishList[i]
    }

    /// Whether the child can buy the item now: its balance covers the price.
    func canAfford(_ item: SimWishItem) -> Bool {
        (child(item.childId)?.currentBalance ?? 0) >= item.price
    }
}
