import Foundation

/// A sink muted for one child until a time ("Mute today" on a popup, `allowance-relay mute add`). The sink `*`
/// stands for every sink.
public struct Mute: Sendable, Equatable {
    public static let everySink = "*"

    public let sink: String
    public let childId: UUID
    public let until: Date

    public init(sink: String, childId: UUID, until: Date) {
        self.sink = sink
        self.childId = childId
        self.until = until
    }
}
