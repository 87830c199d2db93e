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
    logger.logLevel = .critical
    let simulator = HubSimulator(configuration: config, logger: logger)
    let (stream, continuation) = AsyncStream<String>.makeStream()
    try await withThrowingTaskGroup(of: Void.self) { group in
        group.addTask { try await simulator.run { continuation.yield($0) } }
        var it = stream.makeAsyncIterator()
        let base = URL(string: await it.next()!)!
        defer { group.cancelAll() }
        try await body(base)
    }
}
