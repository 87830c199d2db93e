import Foundation
import SignalRProtocol

extension HubEvent {
    /// The arguments of `target` read straight from MessagePack, in the shape an ASP.NET Core hub writes them with its
    /// default resolvers: the transaction a map keyed by its C# property names (`Id`, `ChildId`, `Amount`; any case is
    /// taken), money as a decimal's text (or a number), the date a timestamp (or ISO-8601 text), ids as strings. nil
    /// for anything else, which `init(target:arguments:)` then decodes from the parsed tree with its exact checks.
    /// `HubEventReadTests` checks that both give the same event; `target` is spelled as registered, as for JSON.
    public static func read(target: String, _ r: inout MessagePackReader) -> HubEvent? {
        guard let count = r.readArrayHeader() else { return nil }
        let event: HubEvent
        switch target {
        case transactionCreatedTarget:
            guard count == 1 else { return nil }
            if let id = r.readStringBytes() {
                guard let uuid = FastParse.uuid(bytes: id) else { return nil }
                event = .transactionCreatedId(uuid)
            } else {
                guard let t = Transaction.read(&r) else { return nil }
                event = .transactionCreated(t)
            }
        case balanceUpdatedTarget:
            guard count == 2, let id = r.readStringBytes(),
                let child = FastParse.uuid(bytes: id),
                let balance = Money.text(&r, FastParse.decimal(bytes:))
            else { return nil }
            event = .balanceUpdated(childId: child, balance: balance)
        default:
            return nil
        }
        return event
    }
}

extension Transaction {
    /// A transaction map in the ASP.NET Core shape (see `HubEvent.read(target:_:)` for MessagePack); nil for anything else.
    static func read(_ r: inout MessagePackReader) -> Transaction? {
        guard let count = r.readMapHeader() else { return nil }
        var id: UUID?
        var childId: UUID?
        var amount: Int64?
        var balanceAfter: Int64?
        var createdAt: Date?
        var type: TransactionType?
        var description: String?
        var createdByName: String?
        for _ in 0..<count {
            guard let key = r.readStringBytes() else { return nil }
            switch PropertyKey(bytes: key) {
            case "id":
                guard id == nil,
                    let v = r.readStringBytes().flatMap(FastParse.uuid(bytes:))
                else { return nil }
                id = v
            case "childid":
                guard childId == nil,
                    let v = r.readStringBytes().flatMap(FastParse.uuid(bytes:))
                else { return nil }
                childId = v
            case "amount":
                guard amount == nil, let v = Money.text(&r, FastParse.cents(bytes:)) else { return nil }
                amount = v
            case "balanceafter":
                guard balanceAfter == nil, let v = Money.text(&r, FastParse.cents(bytes:)) else { return nil }
                balanceAfter = v
            case "type":
                guard type == nil, let s = r.readStringBytes(),
                    let v = TransactionType.read(bytes: s)
                else { return nil }
                type = v
            case "description":
                guard description == nil, let s = r.readString() else { return nil }
                description = s
            case "createdat":
                guard createdAt == nil else { return nil }
                if let v = r.readTimestamp() {
                    createdAt = v
                } else if let s = r.readStringBytes(),
                    let v = FastParse.date(bytes: s)
                {
                    createdAt = v
                } else {
                    return nil
                }
            case "createdbyname":
                guard createdByName == nil else { return nil }
                if r.readNil() { continue }
                guard let s = r.readString() else { return nil }
                createdByName = s
            default:
                // Not UTF-8: the tree path refuses the map, with its error.
                guard key.allSatisfy({ $0 < 0x80 }) || String(validating: key, as: UTF8.self) != nil, r.skip()
                else { return nil }
            }
        }
        guard let id, let childId, let amount, let type, let description, let balanceAfter, let createdAt else {
            return nil
        }
        return Transaction(
            id: id, childId: childId, cents: amount, type: type,
            description: SafeText.stored(description, limit: SafeText.maxDescription),
            balanceAfterCents: balanceAfter, createdAt: createdAt,
            createdByName: SafeText.stored(createdByName ?? "", limit: SafeText.maxName))
    }
}

/// A map key as C# names a property, matched against a lower-case literal with ASCII letters in either case (the
/// hub's resolver may write `Amount` or `amount`); the keys matched here have no letter that another script's
/// capital lowers to.
private struct PropertyKey {
    let bytes: UnsafeBufferPointer<UInt8>

    static func ~= (literal: StaticString, key: PropertyKey) -> Bool { key.bytes.spells(lowercased: literal) }
}

extension Money {
    /// Money as an ASP.NET Core hub writes a `decimal` in MessagePack (its text), or a number (another resolver),
    /// lent to `parse` as its text's bytes.
    static func text<T>(_ r: inout MessagePackReader, _ parse: (UnsafeBufferPointer<UInt8>) -> T?) -> T? {
        if let s = r.readStringBytes() { return parse(s) }
        if let i = r.readInt() {
            var text = String(i)
            return text.withUTF8(parse)
        }
        return nil  // floats go to the tree path, which says what it thinks of binary money
    }
}
