import Foundation

/// What applying an event did.
public enum ApplyResult: Sendable, Equatable {
    /// Stored. `gap` names a child whose cache disagrees with the event: a catch-up for it is due.
    case stored(gap: UUID?)
    /// Seen before (same transaction id): nothing changed.
    case duplicate
    /// The event cannot be stored on its own (an id-only transaction, an unknown child): catch up first.
    case needsCatchUp(reason: String)
    /// A transaction the relay cannot keep (an amount of 0, three decimals, a date in the future), or a balance with
    /// more than two decimals: set aside with the reason (`first`: for the first time) and reported; the events
    /// around it are stored.
    case rejected(reason: String, first: Bool)
}
