import AllowanceAPI
import Core
import Foundation
import SignalRProtocol
import Store
import Synchronization
import TestSupport
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

func withSim(_ body: (URL) async throws -> Void) async throws {
    try await withSimulator(token: "e2e-token", { _ in }, body)
}

/// The environment of a relay against `withSim`'s simulator, with its database at `store`.
func simRelayEnv(_ base: URL, store: String) -> [String: String] {
    [
        "ALLOWANCE_RELAY_SERVER_URL": base.absoluteString, "ALLOWANCE_RELAY_SERVER_TOKEN": "e2e-token",
        "ALLOWANCE_RELAY_STORE_PATH": store,
    ]
}

/// `allowance-relay run` as a child process, its stdout and stderr collected.
final class RelayProcess: Sendable {
    private let process: Process
    private let collected = OutputBuffer()

    init(env: [String: String], arguments: [String] = ["run"]) throws {
        process = Process()
        process.executableURL = URL(fileURLWithPath: relayBinaryPath)
        process.arguments = arguments
        var environment = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("ALLOWANCE_RELAY_") }
        // Never the user's real database: a fresh file unless the test names one; never the user's own config
        // file either (an empty config folder, unless the test gives one).
        environment["ALLOWANCE_RELAY_STORE_PATH"] =
            FileManager.default.temporaryDirectory.appending(path: "relay-e2e-\(UUID())/relay.sqlite").path
        environment["XDG_CONFIG_HOME"] =
            FileManager.default.temporaryDirectory.appending(path: "relay-e2e-config-\(UUID())").path
        environment.merge(env) { $1 }
        // the config file's
        if environment["ALLOWANCE_RELAY_STORE_PATH"] == "" { environment["ALLOWANCE_RELAY_STORE_PATH"] = nil }
        process.environment = environment
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        try process.run()
        Self.collect(pipe.fileHandleForReading, into: collected)
    }

    /// Reads the relay's output with blocking reads on a thread of its own, to its end (the relay's exit). Not
    /// FileHandle's readabilityHandler: tearing its dispatch read source down races libdispatch's epoll bookkeeping
    /// on Linux (swift-corelibs-libdispatch#949), which crashed a CI run in `_dispatch_event_loop_drain`.
    private static func collect(_ handle: FileHandle, into collected: OutputBuffer) {
        let reader = Thread {
            var buffer = [UInt8](repeating: 0, count: 65_536)
            while true {
                let n = buffer.withUnsafeMutableBytes { read(handle.fileDescriptor, $0.baseAddress, $0.count) }
                if n < 0 && errno == EINTR { continue }
                guard n > 0 else { break }
                collected.append(String(decoding: buffer[..<n], as: UTF8.self))
            }
            collected.end()
            try? handle.close()
        }
        reader.start()
    }

    /// A test that fails (throws) before `stop` would leave its relay running, loading the machine for the tests
    /// after it: the relay goes with the test.
    deinit {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
    }

    var output: String { collected.text }
    var pid: Int32 { process.processIdentifier }
    var isRunning: Bool { process.isRunning }

    func waitFor(_ text: String, timeout: Duration = .seconds(15)) async -> Bool {
        await waitFor(count: 1, of: text, timeout: timeout)
    }

    func waitFor(count: Int, of text: String, timeout: Duration = .seconds(15)) async -> Bool {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if output.components(separatedBy: text).count - 1 >= count { return true }
            try? await Task.sleep(for: .milliseconds(50))
        }
        Issue.record("no \(count)× '\(text)' in:\n\(output)")
        return false
    }

    /// Runs a short command to completion and returns its output.
    static func output(_ arguments: [String], env: [String: String]) async throws -> String {
        let p = try RelayProcess(env: env, arguments: arguments)
        let status = await p.wait()
        try #require(status == 0, "allowance-relay \(arguments.joined(separator: " ")) exited \(status): \(p.output)")
        return p.output
    }

    func stop(signal: Int32) async -> Int32 {
        kill(process.processIdentifier, signal)
        return await wait()
    }

    /// SIGTERM, and the exit `run --help` promises for it: 0. Anything else fails the test with how the relay ended
    /// and its last output, which is all there is to go on when it happens once in many runs.
    func expectCleanStop(_ comment: Comment? = nil, sourceLocation: SourceLocation = #_sourceLocation) async {
        // A SIGTERM in a process's first milliseconds, while it is still being loaded, meets the default action (as
        // in any program): a test that stops a relay it has just started waits until the relay catches it.
        #expect(await waitUntilCatching(SIGTERM), "the relay never caught SIGTERM", sourceLocation: sourceLocation)
        let status = await stop(signal: SIGTERM)
        let how = process.isRunning ? "" : process.terminationReason == .uncaughtSignal ? "killed by signal" : "exited"
        #expect(
            status == 0, "\(comment.map { "\($0): " } ?? "")\(how) \(status) after SIGTERM:\n\(output.suffix(4000))",
            sourceLocation: sourceLocation)
    }

    /// Whether the relay has a handler for `signal` yet.
    func catches(_ signal: Int32) -> Bool { SignalDisposition.caught(signal, by: pid) }

    func waitUntilCatching(_ signal: Int32, timeout: Duration = .seconds(15)) async -> Bool {
        let deadline = ContinuousClock.now + timeout
        while !catches(signal) {
            guard process.isRunning, ContinuousClock.now < deadline else { return false }
            try? await Task.sleep(for: .milliseconds(1))
        }
        return true
    }

    /// Waits for the exit, at most `limit`: a relay that does not end is killed and the test fails with its output.
    /// It waits without holding a thread: the suites share a cooperative pool of one thread per core, and a
    /// blocking wait there starved the in-process webhook receiver the relay was waiting for (a graceful stop then
    /// ran into its 10 s deadline with the answer unsent).
    func wait(limit: Duration = .seconds(60)) async -> Int32 {
        let deadline = ContinuousClock.now + limit
        while process.isRunning && ContinuousClock.now < deadline { try? await Task.sleep(for: .milliseconds(20)) }
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            Issue.record(
                "allowance-relay \(process.arguments?.joined(separator: " ") ?? "") did not end within \(limit):\n\(output.suffix(4000))"
            )
            return -1
        }
        // The last output: read to the pipe's end (a child the relay started may hold it open a while longer).
        let readToEnd = ContinuousClock.now + .seconds(2)
        while !collected.ended && ContinuousClock.now < readToEnd { try? await Task.sleep(for: .milliseconds(5)) }
        return process.terminationStatus
    }
}

final class OutputBuffer: Sendable {
    private let storage = Mutex((text: "", ended: false))
    func append(_ s: String) { storage.withLock { $0.text += s } }
    /// The writer's side closed: nothing more will come.
    func end() { storage.withLock { $0.ended = true } }
    var text: String { storage.withLock { $0.text } }
    var ended: Bool { storage.withLock { $0.ended } }
}
