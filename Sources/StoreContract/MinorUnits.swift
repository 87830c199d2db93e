import AllowanceAPI
import Foundation

/// Money as integer minor units (cents). Exact both ways; more than two decimals is an error, never rounded.
public enum MinorUnits {
    public static func from(_ amount: Decimal) throws(APIError) -> Int64 {
        guard let value = Money.minorUnits(amount) else {
            throw APIError(.invalidPayload, "The amount \(amount) has more than 2 decimal places or is out of range.")
        }
        return value
    }
}

/// A transaction's amounts in cents: the amount, the balance after it, and the balance before it that they imply.
public typealias TransactionCents = (amount: Int64, balanceAfter: Int64, balanceBefore: Int64)

extension Transaction {
    /// The amounts in cents, or the error for one with more than two decimals.
    public func cents() throws(APIError) -> TransactionCents {
        guard let amountCents, let balanceAfterCents else {
            throw APIError(
                .invalidPayload,
                "The amount \(amountCents == nil ? amount : balanceAfter) has more than 2 decimal places or is out of range."
            )
        }
        return (
            amountCents, balanceAfterCents,
            type == .credit ? balanceAfterCents - amountCents : balanceAfterCents + amountCents
        )
    }
}
