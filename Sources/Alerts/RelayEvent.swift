import AllowanceAPI
import Core
import Foundation

/// Something that happened which the relay's rules may turn into alerts. The store builds it inside the SQLite
/// transaction that records the happening, keeps it in each delivery row it plans (as JSON, the documented shape of
/// `docs/webhook.schema.json`'s `alert`), and hands the rows with the value itself to the sink workers; a row read
/// back from the ledger is decoded once.
public struct RelayEvent: Sendable, Equatable {
    public enum Kind: String, Sendable, CaseIterable {
        case transactionCreated = "transaction.created"
        case balanceUpdated = "balance.updated"
        /// Derived by the planner: a balance went below a rule's threshold.
        case balanceLow = "balance.low"
        /// Derived by the planner for popups only: a low balance is back at or above the threshold, so the
        /// low-balance popup is closed. Not a kind rules name.
        case balanceRecovered = "balance.recovered"
        case outboxRejected = "outbox.rejected"
        case outboxDead = "outbox.dead"
        case connectionLost = "connection.lost"
        case deliveryDisabled = "delivery.disabled"
        /// The server's data contradicts the cache (another server, or a reset one): syncing stopped.
        case syncConflict = "sync.conflict"
        /// A transaction from the server could not be stored (set aside with the reason); the rest syncs.
        case syncRejected = "sync.rejected"
        /// Several transactions of one child folded into one message (after a catch-up or quiet hours).
        case digest = "digest"
        /// `allowance-relay notify test`.
        case test = "test"
        /// A child's day or week in one message, at a time of day (a rule's `summary:`).
        case summary = "summary"
        /// A child's balance reached the price of an item on the wish list not bought yet (once per crossing).
        case goalReached = "goal.reached"
        /// An item on a child's wish list was bought.
        case goalPurchased = "goal.purchased"

        /// Kinds the relay makes itself, which rules cannot name.
        public static let derivedOnly: Set<Kind> = [.digest, .test, .balanceRecovered, .summary]

        /// Hashes the case, not its text: a raw-value enum otherwise hashes its whole raw String (SipHash over
        /// "transaction.created"), and a rule's `events` set is asked several times for every event planned.
        public func hash(into hasher: inout Hasher) { hasher.combine(ordinal) }

        /// The kind's bit in a `KindMask`.
        var bit: UInt16 { 1 << ordinal }

        private var ordinal: UInt8 {
            switch self {
            case .transactionCreated: 0
            case .balanceUpdated: 1
            case .balanceLow: 2
            case .balanceRecovered: 3
            case .outboxRejected: 4
            case .outboxDead: 5
            case .connectionLost: 6
            case .deliveryDisabled: 7
            case .syncConflict: 8
            case .syncRejected: 9
            case .digest: 10
            case .test: 11
            case .summary: 12
            case .goalReached: 13
            case .goalPurchased: 14
            }
        }
    }

    /// Kinds as the bits of one word: a rule's kinds are asked several times for every event planned, and a
    /// `Set` hashes the kind for each question.
    public struct KindMask: Sendable, Equatable {
        private var bits: UInt16 = 0

        public init(_ kinds: some Sequence<Kind>) {
            for kind in kinds { bits |= kind.bit }
        }

        public func contains(_ kind: Kind) -> Bool { bits & kind.bit != 0 }
    }

    public var kind: Kind
    public var at: Date
    public var childId: UUID?
    public var childName: String?
    public var transaction: Transaction?
    /// The balance after the event, and before it (as the cache had it).
    public var balance: Decimal? { didSet { balanceCents = balance.flatMap(Money.minorUnits) } }
    public var previousBalance: Decimal? { didSet { previousBalanceCents = previousBalance.flatMap(Money.minorUnits) } }
    /// The two balances in cents, kept beside them (nil: none, or more than two decimals): the store has them in
    /// cents, and the alert's JSON and the rules' comparisons need them for every event planned, where Decimal's
    /// conversions and comparisons cost more than the rest of the rule.
    public private(set) var balanceCents: Int64?
    public private(set) var previousBalanceCents: Int64?
    /// Fetched by a catch-up rather than pushed live.
    public var caughtUp: Bool
    /// Fetched by the first catch-up of a new database: the family's history before the relay, which
    /// `relay.history` decides about (by default, no alert). In the alert only when true.
    public var history = false
    /// Free text: why a write was refused, which sink was disabled, how long the hub has been away.
    public var detail: String?
    /// For a digest: how many transactions, and their signed sum.
    public var count: Int?
    public var total: Decimal?
    /// For `delivery.disabled`: the sink that was disabled (it is not told about itself).
    public var sink: String?
    /// For a digest: every transaction it folds, oldest first, so that a machine receiver can book each one.
    /// For a summary: the period's transactions.
    public var transactions: [Transaction]?
    /// For a summary: the rule that asked for it (it goes to that rule's sinks only). Not stored in the alert.
    public var summaryRule: String?
    /// For `goal.reached` and `goal.purchased`: the wish list item.
    public var goal: Goal?
    /// For a summary: when its period began (it ends at `at`), and the child's goals still to buy, with their progress.
    public var from: Date?
    public var goals: [Goal]?
    /// The W3C `traceparent` of the span that handled the event (tracing on): stored with each delivery it plans,
    /// so that every send continues the event's trace. Not stored in the alert.
    public var traceParent: String?

    public init(
        kind: Kind, at: Date, childId: UUID? = nil, childName: String? = nil, transaction: Transaction? = nil,
        balance: Decimal? = nil, previousBalance: Decimal? = nil, caughtUp: Bool = false, detail: String? = nil,
        count: Int? = nil, total: Decimal? = nil, sink: String? = nil, transactions: [Transaction]? = nil
    ) {
        self.kind = kind
        self.at = at
        self.childId = childId
        self.childName = childName
        self.transaction = transaction
        self.balance = balance
        self.previousBalance = previousBalance
        balanceCents = balance.flatMap(Money.minorUnits)
        previousBalanceCents = previousBalance.flatMap(Money.minorUnits)
        self.caughtUp = caughtUp
        self.detail = detail
        self.count = count
        self.total = total
        self.sink = sink
        self.transactions = transactions
    }

    /// An event whose balances the store has in cents (every live transaction and balance change).
    public init(
        kind: Kind, at: Date, childId: UUID, childName: String, transaction: Transaction? = nil,
        balanceCents: Int64, previousBalanceCents: Int64
    ) {
        // Set here, in the type's own initializer, the balances do not run their observers (no conversion back).
        self.kind = kind
        self.at = at
        self.childId = childId
        self.childName = childName
        self.transaction = transaction
        balance = Money.decimal(cents: balanceCents)
        previousBalance = Money.decimal(cents: previousBalanceCents)
        self.balanceCents = balanceCents
        self.previousBalanceCents = previousBalanceCents
        caughtUp = false
    }

    /// Whether the event moved the balance: both balances known and different.
    public var balanceChanged: Bool {
        guard let balance, let previousBalance else { return false }
        if let now = balanceCents, let before = previousBalanceCents { return now != before }
        return balance != previousBalance
    }

    /// The `at` of a stored alert, as written (the writer puts it second), without decoding the rest.
    public static func time(inAlert alert: String) -> String? { string("at", inAlert: alert) }

    /// The `childName` of a stored alert, without decoding the rest.
    public static func childName(inAlert alert: String) -> String? { string("childName", inAlert: alert) }

    /// A top-level string member of a stored alert, read up to it and no further.
    static func string(_ name: StaticString, inAlert alert: String) -> String? {
        var text = alert
        return text.withUTF8 { bytes in
            JSONReader.read(bytes) { r -> String? in
                guard r.enterObject() else { return nil }
                while let key = r.nextKey() {
                    if name ~= key { return r.string() }
                    guard r.skipValue() else { return nil }
                }
                return nil
            }
        }
    }

    /// The documented `data` object of the generic webhook (`docs/webhook.schema.json`, `$defs/alert`): stable keys,
    /// money as exact decimal strings ("26.00", never a float), with the family's `currency` when it is given. The
    /// same object, without the currency, is what the delivery ledger stores.
    public func json(currency: String? = nil) -> JSONValue {
        try! JSONValue(parsing: jsonText(currency: currency).utf8)  // the writer's own output always parses
    }

    public var json: JSONValue { json() }

    /// The same object as text, written directly: every planned delivery stores it.
    public func jsonText(currency: String? = nil) -> String {
        // An alert with its transaction: 459-477 bytes in the benchmark; the default 256 regrew for every one. 992:
        // with the array's header, the largest block glibc's per-thread cache holds (1,024 bytes); 1,024 took the
        // allocator's slower path for every alert.
        var w = JSONWriter(capacity: 992)
        w.beginObject()
        w.member("kind", kind.rawValue)
        w.member("at") { ISODate.append(at, to: &$0) }
        if let currency { w.member("currency", currency) }
        if let childId { w.member("childId") { childId.appendLowercased(to: &$0) } }
        if let childName { w.member("childName", childName) }
        if let t = transaction {
            w.key("transaction")
            t.write(into: &w)
        }
        if let balance {
            w.key("balance")
            Money.write(balance, cents: balanceCents, into: &w)
        }
        if let previousBalance {
            w.key("previousBalance")
            Money.write(previousBalance, cents: previousBalanceCents, into: &w)
        }
        w.key("caughtUp")
        w.bool(caughtUp)
        if history {
            w.key("history")
            w.bool(true)
        }
        if let detail { w.member("detail", detail) }
        if let count {
            w.key("count")
            w.number(String(count))
        }
        if let total {
            w.key("total")
            Money.write(total, into: &w)
        }
        if let transactions {
            w.key("transactions")
            w.beginArray()
            for t in transactions { t.write(into: &w) }
            w.endArray()
        }
        if let sink { w.member("sink", sink) }
        if let goal {
            w.key("goal")
            goal.write(into: &w)
        }
        if let from { w.member("from", ISODate.string(from)) }
        if let goals {
            w.key("goals")
            w.beginArray()
            for g in goals { g.write(into: &w) }
            w.endArray()
        }
        w.endObject()
        return w.text
    }

    public init(json: JSONValue) throws(APIError) {
        guard let k = json["kind"]?.stringValue.flatMap(Kind.init(rawValue:)) else {
            throw APIError(.invalidPayload, "alert: unknown kind \(json["kind"]?.serialized ?? "null")")
        }
        kind = k
        at = json["at"]?.stringValue.flatMap(ISODate.parse) ?? .distantPast
        childId = json["childId"]?.stringValue.flatMap(UUID.init(uuidString:))
        childName = json["childName"]?.stringValue
        if let t = json["transaction"] { transaction = try Transaction(json: t) }
        balance = json["balance"].flatMap(Money.decimal)
        previousBalance = json["previousBalance"].flatMap(Money.decimal)
        balanceCents = balance.flatMap(Money.minorUnits)
        previousBalanceCents = previousBalance.flatMap(Money.minorUnits)
        caughtUp = json["caughtUp"]?.boolValue ?? false
        history = json["history"]?.boolValue ?? false
        detail = json["detail"]?.stringValue
        count = json["count"]?.intValue
        total = json["total"].flatMap(Money.decimal)
        sink = json["sink"]?.stringValue
        if case .array(let items) = json["transactions"] {
            transactions = try items.map { (item) throws(APIError) -> Transaction in try Transaction(json: item) }
        }
        if let g = json["goal"] { goal = try Goal(json: g) }
        from = json["from"]?.stringValue.flatMap(ISODate.parse)
        if case .array(let items) = json["goals"] {
            goals = try items.map { (item) throws(APIError) -> Goal in try Goal(json: item) }
        }
    }
}

/// A wish list item as an alert names it: what, for how much, and how far the balance is towards it.
public struct Goal: Sendable, Equatable {
    public var id: UUID
    public var name: String
    public var price: Decimal
    public var url: String?
    /// The balance against the price, in whole percent, at most 100.
    public var progress: Int

    public init(id: UUID, name: String, price: Decimal, url: String? = nil, progress: Int) {
        self.id = id
        self.name = name
        self.price = price
        self.url = url
        self.progress = progress
    }

    /// How far `balance` is towards `price`, in whole percent rounded down (0 to 100): 99 until it is there.
    public static func progress(balance: Decimal, price: Decimal) -> Int {
        guard price > 0, balance > 0 else { return 0 }
        guard balance < price else { return 100 }
        var ratio = balance * 100 / price
        var whole = Decimal()
        NSDecimalRound(&whole, &ratio, 0, .down)
        return min(99, NSDecimalNumber(decimal: whole).intValue)
    }

    func write(into w: inout JSONWriter) {
        w.beginObject()
        w.member("id", id.lowercased)
        w.member("name", name)
        w.key("price")
        Money.write(price, into: &w)
        if let url { w.member("url", url) }
        w.key("progress")
        w.number(String(progress))
        w.endObject()
    }

    init(json: JSONValue) throws(APIError) {
        guard let id = json["id"]?.stringValue.flatMap(UUID.init(uuidString:)), let name = json["name"]?.stringValue,
            let price = json["price"].flatMap(Money.decimal)
        else { throw APIError(.invalidPayload, "alert: goal needs id, name and price") }
        self.init(
            id: id, name: name, price: price, url: json["url"]?.stringValue, progress: json["progress"]?.intValue ?? 0)
    }
}

/// Turns events into deliveries: the relay's rules. Called inside the store's write transaction, so it must be
/// quick and must not touch the database; whatever it returns is written in that same transaction.
public protocol AlertPlanner: Sendable {
    func plan(_ event: RelayEvent) -> [PlannedDelivery]
    /// Whether an event of this kind can lead to any alert: when not, the store skips building it (a hot path).
    func mayPlan(for kind: RelayEvent.Kind) -> Bool
    /// The family's currency, written into every stored alert (nil: none said).
    var currency: String? { get }
}

extension AlertPlanner {
    public func mayPlan(for kind: RelayEvent.Kind) -> Bool { true }
    public var currency: String? { nil }
}

/// One alert owed to one sink.
public struct PlannedDelivery: Sendable, Equatable {
    public enum Urgency: String, Sendable, CaseIterable {
        case low, normal, critical
    }

    public var sink: String
    public var rule: String
    /// The kind the rule matched (may differ from the event's: `balance.low` is derived from a balance change).
    public var kind: RelayEvent.Kind
    public var urgency: Urgency
    /// May be folded with others of the same child into one digest message.
    public var digest: Bool
    /// Not sent before this time (quiet hours; a short wait that lets a catch-up's pages gather into one digest).
    public var notBefore: Date?
    /// An equal key on the same sink within `dedupWindow` means: already said, skip.
    public var dedupKey: String?
    public var dedupWindow: TimeInterval?
    /// The sink is muted for the child ("Mute today", `allowance-relay mute add`): recorded as `muted`, not sent.
    public var muted = false

    public init(
        sink: String, rule: String, kind: RelayEvent.Kind, urgency: Urgency, digest: Bool = false,
        notBefore: Date? = nil,
        dedupKey: String? = nil, dedupWindow: TimeInterval? = nil
    ) {
        self.sink = sink
        self.rule = rule
        self.kind = kind
        self.urgency = urgency
        self.digest = digest
        self.notBefore = notBefore
        self.dedupKey = dedupKey
        self.dedupWindow = dedupWindow
    }
}
