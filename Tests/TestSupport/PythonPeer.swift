import Core
import Foundation

/// A Python program from Tests/Interop run with the project's venv (`make test` creates .venv with the peers).
public final class PythonPeer: Sendable {
    public static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    public static var python: String? {
        let path =
            ProcessInfo.processInfo.environment["ALLOWANCE_TEST_PYTHON"]
            ?? root.appending(path: ".venv/bin/python").path
        return FileManager.default.isExecutableFile(atPath: path) ? path : nil
    }

    /// Off only on a developer machine without the venv; in CI a missing peer is a failure.
    public static var available: Bool { python != nil || ProcessInfo.processInfo.environment["CI"] != nil }

    private let process: Process
    /// What the peer printed on its first line after "listening ".
    public let address: String

    /// Starts `Tests/Interop/<script>` and waits (up to 20 s, off the pool) for its `listening ...` line.
    public init(script: String, arguments: [String] = []) async throws {
        guard let python = Self.python else { throw PeerError("no Python venv with the test peers: run `make test`") }
        process = Process()
        process.executableURL = URL(fileURLWithPath: python)
        process.arguments = [Self.root.appending(path: "Tests/Interop/\(script)").path] + arguments
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        let reading = output.fileHandleForReading
        let line = await offThread(named: "test-harness") { Self.firstLine(reading) }
        guard let line, line.hasPrefix("listening ") else {
            Self.kill(process)
            throw PeerError("\(script) did not start")
        }
        address = String(line.dropFirst("listening ".count))
    }

    /// Runs a one-shot script from Tests/Interop with `input` on stdin; returns its exit status and stdout.
    public static func run(
        script: String, arguments: [String] = [], input: String
    ) async throws -> (status: Int32, output: String) {
        guard let python else { throw PeerError("no Python venv with the test peers: run `make test`") }
        return try await offThread(named: "test-harness") { try runBlocking(python, script, arguments, input) }
    }

    private static func runBlocking(
        _ python: String, _ script: String, _ arguments: [String], _ input: String
    ) throws -> (status: Int32, output: String) {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: python)
        p.arguments = [root.appending(path: "Tests/Interop/\(script)").path] + arguments
        let stdin = Pipe()
        let stdout = Pipe()
        p.standardInput = stdin
        p.standardOutput = stdout
        p.standardError = stdout
        try p.run()
        stdin.fileHandleForWriting.write(Data(input.utf8))
        try stdin.fileHandleForWriting.close()
        let output = stdout.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        return (p.terminationStatus, String(decoding: output, as: UTF8.self))
    }

    /// SIGKILL: test processes ignore SIGTERM (swift-service-lifecycle does), and children inherit that.
    public func stop() { Self.kill(process) }

    private static func kill(_ p: Process) {
        Foundation.kill(p.processIdentifier, SIGKILL)
        p.waitUntilExit()
    }

    private static func firstLine(_ handle: FileHandle) -> String? {
        var bytes: [UInt8] = []
        let deadline = Date().addingTimeInterval(20)
        while Date() < deadline {
            let chunk = handle.readData(ofLength: 1)
            if chunk.isEmpty { return nil }
            if chunk.first == 0x0A { return String(decoding: bytes, as: UTF8.self) }
            bytes += chunk
        }
        return nil
    }

    public struct PeerError: Error, CustomStringConvertible {
        public let description: String
        init(_ description: String) { self.description = description }
    }
}
