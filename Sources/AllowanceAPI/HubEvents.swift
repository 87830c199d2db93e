import Foundation
import SignalRProtocol

/// The two events the Allowance Tracker hub pushes.
public enum HubEvent: Sendable, Equatable {
    /// `TransactionCreated(transaction)`: the whole transaction.
    case transactionCreated(Transaction)
    /// `TransactionCreated(transactionId)`: only the id (older servers); fetch it over REST.
    case transactionCreatedId(UUID)
    /// `BalanceUpdated(childId, newBalance)`: the server's balance, which wins over any local sum.
    case balanceUpdated(childId: UUID, balance: Decimal)

    public static let transactionCreatedTarget = "TransactionCreated"
    public static let balanceUpdatedTarget = "BalanceUpdated"
    public static let targets = [transactionCreatedTarget, balanceUpdatedTarget]

    /// The child whose balance this event moves (nil: an id-only transaction, which a catch-up fetches).
    public var movesBalanceOf: UUID? {
        switch self {
        case .transactionCreated(let t): t.childId
        case .balanceUpdated(let child, _): child
        case .transactionCreatedId: nil
        }
    }

    /// Decodes one invocation; the error names the target, the argument and what was wrong.
    public init(target: String, arguments: HubArguments) throws(APIError) {
        switch target.lowercased() {
        case "transactioncreated":
            let first: JSONValue
            do { first = try arguments.value(at: 0) } catch { throw APIError(.invalidPayload, error.message) }
            if case .string(let s) = first {
                guard let id = FastParse.uuid(s) ?? UUID(uuidString: s) else {
                    throw APIError(.invalidPayload, "TransactionCreated: argument 0 is not a transaction id: \"\(s)\".")
                }
                self = .transactionCreatedId(id)
            } else {
                do {
                    self = .transactionCreated(try Transaction(json: first))
                } catch {
                    throw APIError(.invalidPayload, "TransactionCreated: \(error.message)")
                }
            }
        case "balanceupdated":
            guard arguments.count >= 2 else {
                throw APIError(
                    .invalidPayload,
                    "BalanceUpdated: expected (childId, newBalance), got \(arguments.count) argument(s).")
            }
            guard let s = arguments.values[0].stringValue, let id = FastParse.uuid(s) ?? UUID(uuidString: s) else {
                throw APIError(
                    .invalidPayload,
                    "BalanceUpdated: argument 0 (childId) is not a UUID string: \(arguments.values[0].serialized.prefix(40))."
                )
            }
            guard let balance = Money.decimal(arguments.values[1]) else {
                throw APIError(
                    .invalidPayload,
                    "BalanceUpdated: argument 1 (newBalance) is not a number: \(arguments.values[1].serialized.prefix(40))."
                )
            }
            self = .balanceUpdated(childId: id, balance: balance)
        default:
            throw APIError(.invalidPayload, "'\(target)' is not an Allowance Tracker hub event.")
        }
    }

    /// How the hub connection decodes these events for a `HubEventBuffer`: in one pass from the frame's bytes when
    /// they are in the common form, else from the parsed arguments with every check; a payload that cannot be read
    /// goes to `onError` with what was wrong, and the connection carries on.
    public static func decoder(onError: @escaping @Sendable (String) -> Void) -> HubEventDecoder<HubEvent> {
        HubEventDecoder(
            targets: targets, read: { target, reader in read(target: target, &reader) },
            readMessagePack: { target, reader in read(target: target, &reader) },
            decode: { target, arguments in try HubEvent(target: target, arguments: arguments) },
            onError: { _, error in onError((error as? APIError)?.message ?? "\(error)") },
            isFollowed: { if case .balanceUpdated = $0 { false } else { true } }, followerWait: balanceFollows)
    }

    /// How long a TransactionCreated is held for the BalanceUpdated the backend sends right behind it (in the next
    /// frame): both reach the store writer together and are stored in one commit, one fsync per transaction.
    public static let balanceFollows = Duration.milliseconds(2)

    /// The hub method that carries it.
    public var target: String {
        switch self {
        case .transactionCreated, .transactionCreatedId: Self.transactionCreatedTarget
        case .balanceUpdated: Self.balanceUpdatedTarget
        }
    }

    /// One human line for logs.
    /// The child the event is about (nil: a TransactionCreated that carries only its id).
    public var childId: UUID? {
        switch self {
        case .transactionCreated(let t): t.childId
        case .transactionCreatedId: nil
        case .balanceUpdated(let child, _): child
        }
    }

    public var summary: String { summary(childName: nil) }

    /// The one-line summary with the child named (`child=Alice (1111…)`) when the name is known.
    public func summary(childName: String?) -> String {
        func child(_ id: UUID) -> String {
            childName.map { "\(SafeText.forLog($0)) (\(id.lowercased))" } ?? id.lowercased
        }
        switch self {
        case .transactionCreated(let t):
            return
                "TransactionCreated child=\(child(t.childId)) \(t.type.rawValue) \(Money.signed(t.amount, t.type)) balanceAfter=\(Money.plain(t.balanceAfter)) description=\"\(SafeText.forLog(t.description))\" by=\"\(SafeText.forLog(t.createdByName))\" id=\(t.id.lowercased)"
        case .transactionCreatedId(let id):
            return "TransactionCreated id=\(id.lowercased) (id only: details come from the REST API)"
        case .balanceUpdated(let childId, let balance):
            return "BalanceUpdated child=\(child(childId)) balance=\(Money.plain(balance))"
        }
    }

    /// One JSON object for `--log-format json`, scripts and the inbox.
    public var json: JSONValue { try! JSONValue(parsing: jsonText.utf8) }  // the writer's own output always parses

    /// The same as text, written directly (it is stored with every event).
    public var jsonText: String {
        var w = JSONWriter()
        w.beginObject()
        switch self {
        case .transactionCreated(let t):
            w.member("event", "TransactionCreated")
            t.writeMembers(into: &w)
        case .transactionCreatedId(let id):
            w.member("event", "TransactionCreated")
            w.member("id", id.lowercased)
        case .balanceUpdated(let child, let balance):
            w.member("event", "BalanceUpdated")
            w.member("childId", child.lowercased)
            w.key("balance")
            Money.write(balance, into: &w)
        }
        w.endObject()
        return w.text
    }
}

extension HubEvent {
    /// The arguments of `target` read straight from the frame's bytes, for the form servers send (the transaction
    /// object with known field types, ids as strings, money as numbers or strings); nil for anything else, which
    /// `init(target:arguments:)` then decodes from the parsed tree with its exact checks and error texts.
    /// `HubEventReadTests` checks that both give the same event. `target` is spelled as registered (`targets`), as the
    /// connection hands it over whatever case the server wrote; any other spelling is the tree path's.
    public static func read(target: String, _ r: inout JSONReader) -> HubEvent? {
        guard r.enterArray(), r.nextElement() else { return nil }
        let event: HubEvent
        switch target {
        case transactionCreatedTarget:
            if r.peek() == UInt8(ascii: "\"") {
                guard let id = r.asciiString(FastParse.uuid(bytes:)) else { return nil }
                event = .transactionCreatedId(id)
            } else {
                guard let t = Transaction.read(&r) else { return nil }
                event = .transactionCreated(t)
            }
        case balanceUpdatedTarget:
            guard let child = r.asciiString(FastParse.uuid(bytes:)), r.nextElement(), let balance = Money.read(&r)
            else { return nil }
            event = .balanceUpdated(childId: child, balance: balance)
        default:
            return nil
        }
        guard !r.nextElement(), !r.failed else { return nil }  // exactly the arguments expected
        return event
    }
}

extension Transaction {
    /// A transaction object in the common form (see `HubEvent.read`); nil for anything else.
    static func read(_ r: inout JSONReader) -> Transaction? {
        guard r.enterObject() else { return nil }
        var id: UUID?
        var childId: UUID?
        var amount: Int64?
        var balanceAfter: Int64?
        var createdAt: Date?
        var type: TransactionType?
        var description: String?
        var createdByName: String?
        while let key = r.nextKey() {
            switch key {
            case "id":
                guard id == nil, let v = r.asciiString(FastParse.uuid(bytes:)) else { return nil }
                id = v
            case "childId":
                guard childId == nil, let v = r.asciiString(FastParse.uuid(bytes:)) else { return nil }
                childId = v
            case "amount":
                guard amount == nil, let v = Money.readCents(&r) else { return nil }
                amount = v
            case "balanceAfter":
                guard balanceAfter == nil, let v = Money.readCents(&r) else { return nil }
                balanceAfter = v
            case "type":
                guard type == nil, let v = r.asciiString(TransactionType.read(bytes:)) else { return nil }
                type = v
            case "description":
                guard description == nil, let s = r.string() else { return nil }
                description = s
            case "createdAt":
                guard createdAt == nil, let v = r.asciiString(FastParse.date(bytes:)) else { return nil }
                createdAt = v
            case "createdByName":
                guard createdByName == nil, let s = r.string() else { return nil }
                createdByName = s
            default:
                guard r.skipValue() else { return nil }
            }
        }
        guard !r.failed, let id, let childId, let amount, let type, let description, let balanceAfter, let createdAt
        else { return nil }
        return Transaction(
            id: id, childId: childId, cents: amount, type: type,
            description: SafeText.stored(description, limit: SafeText.maxDescription),
            balanceAfterCents: balanceAfter, createdAt: createdAt,
            createdByName: SafeText.stored(createdByName ?? "", limit: SafeText.maxName))
    }
}

extension Money {
    /// A number, or a string holding one, in the plain form `FastParse.decimal` reads; nil for anything else.
    static func read(_ r: inout JSONReader) -> Decimal? { text(&r, FastParse.decimal(bytes:)) }

    /// The same with at most two decimals, as cents; nil for anything else (more decimals are the tree path's to judge).
    static func readCents(_ r: inout JSONReader) -> Int64? { text(&r, FastParse.cents(bytes:)) }

    /// Money as the server writes it, a JSON number or a plain string holding one, lent to `parse` as its bytes
    /// (no String made for it); a string with escapes is the tree path's.
    private static func text<T>(_ r: inout JSONReader, _ parse: (UnsafeBufferPointer<UInt8>) -> T?) -> T? {
        r.peek() == UInt8(ascii: "\"") ? r.asciiString(parse) : r.number(parse)
    }
}

extension TransactionType {
    /// The raw value as plain ASCII bytes (see `Transaction.read`); nil for anything else.
    static func read(bytes: UnsafeBufferPointer<UInt8>) -> TransactionType? {
        // Compared with the literals' own bytes: through a String's UTF8View each byte cost an index step.
        if bytes.spells("Credit") { return .credit }
        if bytes.spells("Debit") { return .debit }
        return nil
    }
}
