import AllowanceAPI
import Foundation

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
