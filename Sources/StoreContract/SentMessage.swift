import Foundation

/// A message a chat destination keeps for something that changes (a child's balance), so that the next change
/// edits it in place instead of posting again: the destination's reference to it (a Telegram message id, a Slack
/// channel and timestamp, a Matrix event id, a Discord message id) and when it was posted. Kept in the database so
/// that a restart edits the same message.
public struct SentMessage: Sendable, Equatable {
    public var ref: String
    public var postedAt: Date

    public init(ref: String, postedAt: Date) {
        self.ref = ref
        self.postedAt = postedAt
    }
}
