import Foundation
import HubSimulator
import Logging
import SignalRClient
import SignalRProtocol
import Synchronization
import TestSupport
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

let testToken = "test-token"

/// The simulator with this suite's token.
func withSimulator(
    _ configure: (inout SimulatorConfiguration) -> Void = { _ in },
    _ body: (URL) async throws -> Void
) async throws {
    try await TestSupport.withSimulator(token: testToken, configure, body)
}

func hubURL(_ base: URL) -> URL { base.appending(path: "hubs/family") }

func options(token: String = testToken, _ edit: (inout HubConnectionOptions) -> Void = { _ in }) -> HubConnectionOptions
{
    var o = HubConnectionOptions()
    o.accessTokenProvider = { token }
    edit(&o)
    return o
}

/// Silent unless ALLOWANCE_TEST_LOG names a level (e.g. ALLOWANCE_TEST_LOG=debug swift test --filter X).
func quietLogger() -> Logger {
    var l = Logger(label: "signalr-test")
    l.logLevel =
        ProcessInfo.processInfo.environment["ALLOWANCE_TEST_LOG"].flatMap(Logger.Level.init(rawValue:)) ?? .critical
    return l
}

/// A counter of the simulator's `/_sim/stats` once it reaches `value`, or its last reading after 10 s (what the server
/// saw of a message the client sent arrives a moment later).
func simStat(_ base: URL, _ key: String, reaching value: Int) async throws -> Int? {
    var seen: Int?
    let deadline = ContinuousClock.now + .seconds(10)
    repeat {
        seen = try await simStats(base)[key]
        if seen == value { break }
        try await Task.sleep(for: .milliseconds(20))
    } while ContinuousClock.now < deadline
    return seen
}

/// Calls a simulator endpoint (REST, or a fault switch under /_sim/).
@discardableResult
func call(
    _ base: URL, _ method: String, _ path: String, body: String? = nil, token: String? = testToken
) async throws -> JSONValue {
    var request = URLRequest(url: URL(string: base.absoluteString + path)!)
    request.httpMethod = method
    if let token { request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization") }
    if let body { request.httpBody = Data(body.utf8) }
    let (data, _) = try await TestHTTP.data(for: request)
    return try JSONValue(parsing: data)
}

/// Collects values from handlers (any task) and lets a test wait for a count.
final class Collector<T: Sendable>: Sendable {
    private let items = Mutex<[T]>([])

    func append(_ item: T) { items.withLock { $0.append(item) } }
    var values: [T] { items.withLock { $0 } }

    /// Waits until at least `count` values arrived, or fails the test after `timeout`.
    func wait(
        for count: Int, timeout: Duration = .seconds(10), sourceLocation: SourceLocation = #_sourceLocation
    ) async -> [T] {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            let v = values
            if v.count >= count { return v }
            try? await Task.sleep(for: .milliseconds(20))
        }
        Issue.record("waited \(timeout) for \(count) values, got \(values.count)", sourceLocation: sourceLocation)
        return values
    }
}

/// Waits for the first event that matches.
func waitForEvent(
    _ events: AsyncStream<HubConnectionEvent>, timeout: Duration = .seconds(15),
    _ match: @escaping @Sendable (HubConnectionEvent) -> Bool
) async -> HubConnectionEvent? {
    await withTaskGroup(of: HubConnectionEvent?.self) { group in
        group.addTask {
            for await e in events where match(e) { return e }
            return nil
        }
        group.addTask {
            try? await Task.sleep(for: timeout)
            return nil
        }
        let first = await group.next() ?? nil
        group.cancelAll()
        return first
    }
}
