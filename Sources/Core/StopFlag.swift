import Synchronization

/// Set once, from anywhere (a synchronous shutdown handler too); read by workers between sends.
public final class StopFlag: Sendable {
    private let value = Atomic<Bool>(false)
    public init() {}
    public func set() { value.store(true, ordering: .releasing) }
    public var isSet: Bool { value.load(ordering: .acquiring) }
}
