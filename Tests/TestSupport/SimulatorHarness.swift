import SignalRProtocol
#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif
import Foundation
import HubSimulator
import Logging

/// Runs the real hub simulator in-process on 127.0.0.1 and a free port for the length of `body`, which gets
/// its base URL. Shared by the test targets that need a backend.
public func withSimulator(
    token: String,
    _ configure: (inout SimulatorConfiguration) -> Void = { _ in },
    _ body: (URL) async throws -> Void
) async throws {
    var config = SimulatorConfiguration()
    config.token = token
    configure(&config)
    var logger = Logger(label: "hub-sim")
    logger.logLevel = ProcessInfo.processInfo.environment["ALLOWANCE_TEST_LOG"].flatMap(Logger.Level.init(rawValue:)) ?? .critical
    let simulator = HubSimulator(configuration: config, logger: logger)
    let (stream, continuation) = AsyncStream<Result<String, any Error>>.makeStream()
    try await withThrowingTaskGroup(of: Void.self) { group in
        group.addTask {
            do {
                try await simulator.run { continuation.yield(.success($0)) }
            } catch {
                continuation.yield(.failure(error))  // e.g. the port is taken: say so instead of waiting forever
                throw error
            }
        }
        var it = stream.makeAsyncIterator()
        guard let started = await it.next() else { throw HarnessError("the simulator did not start (cancelled)") }
        let base = URL(string: try started.get())!
        defer { group.cancelAll() }
        try await body(base)
    }
}

public struct HarnessError: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// A loopback port that is free now and outside Linux's ephemeral range (32768-60999), so no outgoing
/// connection of a parallel test can take it before the test binds it.
public func freeLoopbackPortOutsideEphemeralRange() throws -> Int {
    for _ in 0..<200 {
        let port = Int.random(in: 20_000..<32_000)
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        addr.sin_port = UInt16(port).bigEndian
        let bound = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        if bound == 0 { return port }
    }
    throw HarnessError("no free port between 20000 and 32000")
}

/// A fault or an action of the simulator's control API (`POST /_sim/...`).
public func simPost(_ base: URL, _ path: String) async throws {
    var request = URLRequest(url: URL(string: base.absoluteString + path)!)
    request.httpMethod = "POST"
    _ = try await TestHTTP.data(for: request)
}

/// The simulator's counters (`GET /_sim/stats`): connections, logins, negotiations...
public func simStats(_ base: URL) async throws -> JSONValue {
    let (data, _) = try await TestHTTP.data(from: base.appending(path: "_sim/stats"))
    return try JSONValue(parsing: Array(data))
}

/// A REST answer of the simulator (`GET /api/v1/...`) with its token.
public func simGet(_ base: URL, _ path: String, token: String = "e2e-token") async throws -> JSONValue {
    var request = URLRequest(url: URL(string: base.absoluteString + path)!)
    request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization")
    let (data, _) = try await TestHTTP.data(for: request)
    return try JSONValue(parsing: Array(data))
}
