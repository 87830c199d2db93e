import Foundation

/// A child as the Allowance Tracker API returns it.
struct SimChild: Codable, Sendable {
    var id: UUID
    var firstName: String
    var lastName: String
    var weeklyAllowance: Decimal
    var currentBalance: Decimal
    var lastAllowanceDate: Date?
}

/// A transaction as the Allowance Tracker API returns it. `sequence` is the simulator's family-wide
/// cursor (increasing by one per transaction), used by `?after=` paging.
struct SimTransaction: Codable, Sendable {
    var id: UUID
    var childId: UUID
    var amount: Decimal
    var type: String
    var description: String
    var balanceAfter: Decimal
    var createdAt: Date
    var createdByName: String
    var sequence: Int
}

/// Why a request was refused, as the API's 4xx body says it.
struct APIFailure: Error {
    let status: Int
    let message: String
}

/// The family's data: deterministic from a seed, changed only through `addTransaction`.
actor FamilyStore {
    private(set) var children: [SimChild]
    private(set) var transactions: [SimTransaction] = []
    /// Each child's transactions, oldest first, as positions in `transactions`: a page is a lookup, not a scan of
    /// the family's whole history (a million transactions in `make bench`'s history part).
    private var byChild: [UUID: [Int]] = [:]
    private var byIdempotencyKey: [String: SimTransaction] = [:]
    /// Every child's wish list, in the order the items were added (FamilyStore+WishList).
    var wishList: [SimWishItem] = []
    var random: SeededRandom
    /// Where the family is saved after each change (nil: it lives as long as the process).
    private let stateFile: String?

    /// What `--state FILE` keeps: the family, and where the generator is, so that new ids stay new.
    private struct Saved: Codable {
        var random: UInt64
        var children: [SimChild]
        var transactions: [SimTransaction]
        var idempotencyKeys: [String: UUID]
        /// Absent from a state file written before the wish list.
        var wishList: [SimWishItem]?
    }

    /// `extraChildren` more children after the three fixed ones, and `history` transactions spread over the three
    /// years before now (for measuring a large history; neither is saved apart from the state file).
    init(seed: UInt64, stateFile: String? = nil, extraChildren: Int = 0, history: Int = 0) {
        self.stateFile = stateFile
        random = SeededRandom(seed: seed)
        // Fixed ids so that tests, docs and a restarted simulator agree.
        children = [
            SimChild(
                id: UUID(uuidString: "11111111-1111-4111-8111-111111111111")!, firstName: "Alice", lastName: "Example",
                weeklyAllowance: 10, currentBalance: Decimal(string: "25.50")!, lastAllowanceDate: nil),
            SimChild(
                id: UUID(uuidString: "22222222-2222-4222-8222-222222222222")!, firstName: "Bob", lastName: "Example",
                weeklyAllowance: 7, currentBalance: Decimal(string: "12.00")!, lastAllowanceDate: nil),
            SimChild(
                id: UUID(uuidString: "33333333-3333-4333-8333-333333333333")!, firstName: "Carol", lastName: "Example",
                weeklyAllowance: 5, currentBalance: Decimal(string: "3.75")!, lastAllowanceDate: nil),
        ]
        var family = children
        for n in 0..<extraChildren {
            family.append(
                SimChild(
                    id: random.uuid(), firstName: "Child\(n + 4)", lastName: "Example", weeklyAllowance: 5,
                    currentBalance: Decimal(100), lastAllowanceDate: nil))
        }
        transactions = Self.history(history, children: &family, random: &random)
        children = family
        if let saved = Self.load(stateFile) {
            children = saved.children
            transactions = saved.transactions
            random = SeededRandom(state: saved.random)
            let byId = Dictionary(transactions.map { ($0.id, $0) }, uniquingKeysWith: { a, _ in a })
            byIdempotencyKey = saved.idempotencyKeys.compactMapValues { byId[$0] }
            wishList = saved.wishList ?? []
        }
        byChild = Self.index(transactions)
    }

    /// `count` credits of 1.00 spread over the three years before now, round-robin over the children.
    private static func history(
        _ count: Int, children: inout [SimChild], random: inout SeededRandom
    ) -> [SimTransaction] {
        let span = 3 * 365 * 86400.0
        let start = Date().addingTimeInterval(-span)
        var made: [SimTransaction] = []
        made.reserveCapacity(count)
        for i in 0..<count {
            let c = i % children.count
            children[c].currentBalance += 1
            made.append(
                SimTransaction(
                    id: random.uuid(), childId: children[c].id, amount: 1, type: "Credit", description: "Chores",
                    balanceAfter: children[c].currentBalance,
                    createdAt: start.addingTimeInterval(span * Double(i) / Double(count)),
                    createdByName: "Parent", sequence: i + 1))
        }
        return made
    }

    private static func index(_ transactions: [SimTransaction]) -> [UUID: [Int]] {
        Dictionary(grouping: transactions.indices, by: { transactions[$0].childId })
    }

    private func reindex() { byChild = Self.index(transactions) }

    /// A child's transactions, oldest first.
    func transactions(of child: UUID) -> [SimTransaction] {
        (byChild[child] ?? []).map { transactions[$0] }
    }

    /// A child's transactions after the family-wide `sequence`, oldest first, at most `limit` (the catch-up form).
    func transactions(of child: UUID, after sequence: Int, limit: Int) -> [SimTransaction] {
        let positions = byChild[child] ?? []
        var low = 0
        var high = positions.count
        while low < high {
            let mid = (low + high) / 2
            if transactions[positions[mid]].sequence <= sequence { low = mid + 1 } else { high = mid }
        }
        return positions[low...].prefix(limit).map { transactions[$0] }
    }

    /// A child's transactions newest first, from `offset`, at most `limit` (the app's form).
    func newestTransactions(of child: UUID, offset: Int, limit: Int) -> [SimTransaction] {
        let positions = byChild[child] ?? []
        let end = max(0, positions.count - offset)
        return positions[max(0, end - limit)..<end].reversed().map { transactions[$0] }
    }

    /// The family as `stateFile` keeps it, when there is one (none or a missing file: the seed's family, saved from
    /// the first change on).
    private static func load(_ stateFile: String?) -> Saved? {
        guard let stateFile, let data = FileManager.default.contents(atPath: stateFile) else { return nil }
        guard let saved = try? JSONDecoder().decode(Saved.self, from: data) else {
            FileHandle.standardError.write(
                Data(
                    "allowance-hub-sim: \(stateFile) is not a state file this simulator wrote; starting from the seed\n"
                        .utf8))
            return nil
        }
        return saved
    }

    /// Written whole after each change, atomically: a simulator killed at any moment restarts as the same backend.
    func save() {
        guard let stateFile else { return }
        let saved = Saved(
            random: random.state, children: children, transactions: transactions,
            idempotencyKeys: byIdempotencyKey.mapValues(\.id), wishList: wishList)
        do {
            try JSONEncoder().encode(saved).write(to: URL(fileURLWithPath: stateFile), options: .atomic)
        } catch {
            FileHandle.standardError.write(
                Data("allowance-hub-sim: cannot save the family to \(stateFile): \(error)\n".utf8))
        }
    }

    func child(_ id: UUID) -> SimChild? { children.first { $0.id == id } }

    /// Validates and applies a transaction. The same idempotency key gives the same transaction, once.
    func addTransaction(
        childId: UUID, amount: Decimal, type: String, description: String, by: String, idempotencyKey: String?
    ) throws(APIFailure) -> (transaction: SimTransaction, isNew: Bool) {
        if let key = idempotencyKey, let existing = byIdempotencyKey[key] { return (existing, false) }
        guard let index = children.firstIndex(where: { $0.id == childId }) else {
            throw APIFailure(status: 404, message: "Child \(childId) not found.")
        }
        guard amount > 0 else { throw APIFailure(status: 400, message: "amount must be greater than 0.") }
        guard amount.exponent >= -2 else {
            throw APIFailure(status: 400, message: "amount has more than 2 decimal places.")
        }
        guard type == "Credit" || type == "Debit" else {
            throw APIFailure(status: 400, message: "type must be \"Credit\" or \"Debit\".")
        }
        let trimmed = description.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !trimmed.isEmpty, trimmed.count <= 500 else {
            throw APIFailure(status: 400, message: "description must be 1 to 500 characters.")
        }
        var balance = children[index].currentBalance
        if type == "Debit" {
            guard balance >= amount else {
                throw APIFailure(status: 400, message: "Insufficient funds: balance \(balance), debit \(amount).")
            }
            balance -= amount
        } else {
            balance += amount
        }
        children[index].currentBalance = balance
        let t = SimTransaction(
            id: random.uuid(), childId: childId, amount: amount, type: type, description: trimmed,
            balanceAfter: balance,
            createdAt: Date(), createdByName: by, sequence: transactions.count + 1)
        transactions.append(t)
        byChild[childId, default: []].append(transactions.count - 1)
        if let key = idempotencyKey { byIdempotencyKey[key] = t }
        save()
        return (t, true)
    }

    /// Deletes a child and its transactions (`DELETE /api/v1/children/{id}`); false when there is no such child.
    func removeChild(_ id: UUID) -> Bool {
        guard children.contains(where: { $0.id == id }) else { return false }
        children.removeAll { $0.id == id }
        transactions.removeAll { $0.childId == id }
        wishList.removeAll { $0.childId == id }
        reindex()
        save()
        return true
    }

    /// Sets a child's balance with no transaction behind it (a fault no real server should have).
    func setBalance(_ id: UUID, _ balance: Decimal) -> Bool {
        guard let i = children.firstIndex(where: { $0.id == id }) else { return false }
        children[i].currentBalance = balance
        save()
        return true
    }

    /// A backup restored: the transactions after the first `keep` are gone, and each child's balance goes back to
    /// its last surviving transaction's (or the one it started with). Returns how many were lost.
    func restore(keepingFirst keep: Int) -> Int {
        let lost = transactions.dropFirst(keep)
        for t in lost.reversed() {
            // Undo newest first: the balance before `t` is its balanceAfter minus its effect.
            guard let i = children.firstIndex(where: { $0.id == t.childId }) else { continue }
            children[i].currentBalance = t.type == "Credit" ? t.balanceAfter - t.amount : t.balanceAfter + t.amount
        }
        let lostIds = Set(lost.map(\.id))
        byIdempotencyKey = byIdempotencyKey.filter { !lostIds.contains($0.value.id) }
        transactions.removeLast(lost.count)
        reindex()
        save()
        return lost.count
    }

    /// A plausible random transaction for the activity generator (never overdraws).
    func randomActivity() -> (childId: UUID, amount: Decimal, type: String, description: String) {
        let child = children[Int(random.next() % UInt64(children.count))]
        let cents = Int(random.next() % 1500) + 25
        let amount = Decimal(cents) / 100
        let credit = child.currentBalance < amount || random.next() % 2 == 0
        let spends = ["Ice cream", "Comic book", "Stickers", "Bus fare", "Game credit"]
        let earns = ["Weekly allowance", "Washed the car", "Birthday gift", "Chores"]
        let list = credit ? earns : spends
        return (child.id, amount, credit ? "Credit" : "Debit", list[Int(random.next() % UInt64(list.count))])
    }
}

/// SplitMix64: small, fast, and the same sequence for the same seed on every machine. Public for the tests'
/// seeded fault schedules.
public struct SeededRandom: RandomNumberGenerator, Sendable {
    /// Where the sequence is: a generator made again from it goes on with the same numbers.
    public private(set) var state: UInt64
    public init(seed: UInt64) { state = seed }
    init(state: UInt64) { self.state = state }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    mutating func uuid() -> UUID {
        let a = next()
        let b = next()
        var bytes = [UInt8](repeating: 0, count: 16)
        for i in 0..<8 {
            bytes[i] = UInt8(truncatingIfNeeded: a >> (8 * i))
            bytes[8 + i] = UInt8(truncatingIfNeeded: b >> (8 * i))
        }
        bytes[6] = (bytes[6] & 0x0F) | 0x40
        bytes[8] = (bytes[8] & 0x3F) | 0x80
        return UUID(
            uuid: (
                bytes[0], bytes[1], bytes[2], bytes[3], bytes[4], bytes[5], bytes[6], bytes[7],
                bytes[8], bytes[9], bytes[10], bytes[11], bytes[12], bytes[13], bytes[14], bytes[15]
            ))
    }
}
