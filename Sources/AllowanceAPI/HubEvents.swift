import Foundation
import SignalRClient
import SignalRProtocol

/// The two events the Allowance Tracker hub pushes.
public enum HubEvent: Sendable, Equatable {
    /// `TransactionCreated(transaction)`: the whole transaction.
    case transactionCreated(Transaction)
    /// `TransactionCreated(transactionId)`: only the id (older servers, seed 003); fetch it over REST.
    case transactionCreatedId(UUID)
    /// `BalanceUpdated(childId, newBalance)`: the server's balance, which wins over any local sum.
    case balanceUpdated(childId: UUID, balance: Decimal)

    public static let targets = ["TransactionCreated", "BalanceUpdated"]

    /// Decodes one invocation; the error names the target, the argument and what was wrong.
    public init(target: String, arguments: HubArguments) throws(PayloadError) {
        switch target.lowercased() {
        case "transactioncreated":
            let first: JSONValue
            do { first = try arguments.value(at: 0) } catch { throw PayloadError(message: error.message) }
            if case .string(let s) = first {
                guard let id = FastParse.uuid(s) ?? UUID(uuidString: s) else {
                    throw PayloadError(message: "TransactionCreated: argument 0 is not a transaction id: \"\(s)\".")
                }
                self = .transactionCreatedId(id)
            } else {
                do {
                    self = .transactionCreated(try Transaction(json: first))
                } catch {
                    throw PayloadError(message: "TransactionCreated: \(error.message)")
                }
            }
        case "balanceupdated":
            guard arguments.count >= 2 else {
                throw PayloadError(message: "BalanceUpdated: expected (childId, newBalance), got \(arguments.count) argument(s).")
            }
            guard let s = arguments.values[0].stringValue, let id = FastParse.uuid(s) ?? UUID(uuidString: s) else {
                throw PayloadError(message: "BalanceUpdated: argument 0 (childId) is not a UUID string: \(arguments.values[0].serialized.prefix(40)).")
            }
            guard let balance = Money.decimal(arguments.values[1]) else {
                throw PayloadError(message: "BalanceUpdated: argument 1 (newBalance) is not a number: \(arguments.values[1].serialized.prefix(40)).")
            }
            self = .balanceUpdated(childId: id, balance: balance)
        default:
            throw PayloadError(message: "'\(target)' is not an Allowance Tracker hub event.")
        }
    }

    /// One human line for logs.
    public var summary: String {
        switch self {
        case .transactionCreated(let t):
            return "TransactionCreated child=\(t.childId.uuidString.lowercased()) \(t.type.rawValue) \(Money.signed(t.amount, t.type)) balanceAfter=\(Money.plain(t.balanceAfter)) description=\"\(SafeText.forLog(t.description))\" by=\"\(SafeText.forLog(t.createdByName))\" id=\(t.id.uuidString.lowercased())"
        case .transactionCreatedId(let id):
            return "TransactionCreated id=\(id.uuidString.lowercased()) (id only: details come from the REST API)"
        case .balanceUpdated(let child, let balance):
            return "BalanceUpdated child=\(child.uuidString.lowercased()) balance=\(Money.plain(balance))"
        }
    }

    /// One JSON object for `--log-format json` and scripts.
    public var json: JSONValue {
        switch self {
        case .transactionCreated(let t):
            return [
                "event": "TransactionCreated", "id": .string(t.id.uuidString.lowercased()),
                "childId": .string(t.childId.uuidString.lowercased()), "type": .string(t.type.rawValue),
                "amount": Money.json(t.amount), "balanceAfter": Money.json(t.balanceAfter),
                "description": .string(t.description), "createdByName": .string(t.createdByName),
                "createdAt": .string(Date.ISO8601FormatStyle(includingFractionalSeconds: true).format(t.createdAt)),
            ]
        case .transactionCreatedId(let id):
            return ["event": "TransactionCreated", "id": .string(id.uuidString.lowercased())]
        case .balanceUpdated(let child, let balance):
            return ["event": "BalanceUpdated", "childId": .string(child.uuidString.lowercased()), "balance": Money.json(balance)]
        }
    }
}
