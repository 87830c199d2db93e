import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The request got no answer in time.
public struct DeadlineExceeded: Error, LocalizedError, Sendable {
    public let after: Duration
    public var errorDescription: String? { "no answer within \(after)" }
}

/// Runs `body` and cancels it after `deadline`, throwing `DeadlineExceeded`.
///
/// For every URLSession request: on Linux a request whose server accepted the connection and then stayed silent
/// is not ended at its `timeoutInterval` (seen: a 2 s timeout still waiting after 60 s, and busy). Cancelling
/// the calling task does end it, so the deadline is enforced here. `body` must end when cancelled.
public func withDeadline<T: Sendable>(_ deadline: Duration, _ body: @escaping @Sendable () async throws -> T) async throws -> T {
    try await withThrowingTaskGroup(of: T.self) { group in
        group.addTask { try await body() }
        group.addTask {
            try await Task.sleep(for: deadline)
            throw DeadlineExceeded(after: deadline)
        }
        defer { group.cancelAll() }
        return try await group.next()!
    }
}

extension URLRequest {
    /// The request's own timeout as a deadline for `withDeadline`.
    public var deadline: Duration { .milliseconds(Int64(timeoutInterval * 1000)) }
}
