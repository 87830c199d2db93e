import Foundation
import HubSimulator
import Logging
import Synchronization

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

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
    logger.logLevel =
        ProcessInfo.processInfo.environment["ALLOWANCE_TEST_LOG"].flatMap(Logger.Level.init(rawValue:)) ?? .critical
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
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
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

/// The simulator's counters (`GET /_sim/stats`: connections, logins, negotiations, replayed...), read with
/// JSONSerialization: a test's oracle, so never through the client's JSON reader.
public struct SimStats: Sendable {
    public let counters: [String: Int]
    /// Each connected client's own counters (pingsReceived, messagesReceived).
    public let clients: [[String: Int]]

    public subscript(key: String) -> Int? { counters[key] }
}

public func simStats(_ base: URL) async throws -> SimStats {
    let (data, _) = try await TestHTTP.data(from: base.appending(path: "_sim/stats"))
    guard let object = try JSONSerialization.jsonObject(with: data) as? [String: Any] else {
        throw HarnessError(
            "/_sim/stats answered something other than an object: \(String(decoding: data, as: UTF8.self))")
    }
    let ints = { (o: [String: Any]) in o.compactMapValues { ($0 as? NSNumber)?.intValue } }
    return SimStats(counters: ints(object), clients: (object["clients"] as? [[String: Any]] ?? []).map(ints))
}

/// A program of this package, built beside the test bundle (`swift build --build-tests` builds them all).
public func builtProgram(_ name: String) -> String {
    URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appending(path: name).path
}

/// The simulator's own binary (`allowance-hub-sim`, built beside the test bundle) as a child process, its family kept in
/// a state file: a test can `kill -9` it, the hub's process dying mid-write, and start it again on the same port as the
/// same backend.
public final class SimulatorProcess: Sendable {
    public let base: URL
    private let arguments: [String]
    private let log: String
    private let pid = Mutex<pid_t>(0)

    public init(token: String) async throws {
        let dir = FileManager.default.temporaryDirectory.appending(path: "hub-sim-\(UUID())")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let port = try freeLoopbackPortOutsideEphemeralRange()
        base = URL(string: "http://127.0.0.1:\(port)")!
        log = dir.appending(path: "hub-sim.log").path
        let binary = builtProgram("allowance-hub-sim")
        arguments = [
            binary, "--port", "\(port)", "--token", token, "--state", dir.appending(path: "family.json").path,
            "--log-level", "warning",
        ]
        try await start()
    }

    /// Starts the binary and waits until it accepts connections.
    public func start() async throws {
        let child = try spawnServer(arguments, output: log)
        pid.withLock { $0 = child }
        let port = base.port!
        let deadline = ContinuousClock.now + .seconds(30)
        while !acceptsConnections(port) {
            var status: Int32 = 0
            guard waitpid(child, &status, WNOHANG) == 0, ContinuousClock.now < deadline else {
                throw HarnessError("allowance-hub-sim did not start: \(self.output.suffix(2000))")
            }
            try await Task.sleep(for: .milliseconds(20))
        }
    }

    /// `kill -9`, and reaped: its sockets go without a Close, what it had not saved is gone.
    public func crash() { stopServer(pid.withLock { $0 }, signal: SIGKILL) }

    public func stop() { stopServer(pid.withLock { $0 }) }

    public var output: String { (try? String(contentsOfFile: log, encoding: .utf8)) ?? "" }
}

/// One call of the simulator's REST API with its token: (status, body parsed by Foundation's JSONSerialization,
/// nil when empty). A test's oracle and its set-up: never through the client's JSON reader.
public func simREST(
    _ base: URL, _ method: String, _ path: String, _ body: [String: Any]? = nil, token: String = "e2e-token"
) async throws -> (status: Int, json: Any?) {
    var request = URLRequest(url: URL(string: base.absoluteString + path)!)
    request.httpMethod = method
    request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization")
    if let body {
        request.httpBody = try JSONSerialization.data(withJSONObject: body)
        request.setValue("application/json", forHTTPHeaderField: "Content-Type")
    }
    let (data, response) = try await TestHTTP.data(for: request)
    return (
        (response as? HTTPURLResponse)?.statusCode ?? 0,
        data.isEmpty ? nil : try JSONSerialization.jsonObject(with: data)
    )
}
