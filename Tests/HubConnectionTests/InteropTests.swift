import Foundation
import SignalRClient
import SignalRProtocol
import Testing

/// The Python venv with the interop peers (`make test` creates it at .venv).
enum InteropPeer {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    static var python: String? {
        let path = ProcessInfo.processInfo.environment["ALLOWANCE_TEST_PYTHON"] ?? root.appending(path: ".venv/bin/python").path
        return FileManager.default.isExecutableFile(atPath: path) ? path : nil
    }

    /// Off only on a developer machine without the venv; in CI a missing peer is a failure.
    static var enabled: Bool { python != nil || ProcessInfo.processInfo.environment["CI"] != nil }
}

@Suite(.serialized, .timeLimit(.minutes(2)), .enabled(if: InteropPeer.enabled, "needs .venv with the peers: make test creates it"))
struct InteropTests {
    /// Our client against aiosignalr, a Python server nobody here wrote, which sends JSON in Binary frames.
    @Test func ourClientReceivesInvocationsFromAiosignalr() async throws {
        let python = try #require(InteropPeer.python, "no Python venv with aiosignalr (run make test)")
        let process = Process()
        process.executableURL = URL(fileURLWithPath: python)
        process.arguments = [InteropPeer.root.appending(path: "Tests/Interop/aiosignalr_server.py").path]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        // SIGKILL: this test process ignores SIGTERM (swift-service-lifecycle does), and children inherit that.
        defer {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
        let line = try #require(readLine(from: output.fileHandleForReading))
        let url = try #require(URL(string: String(line.dropFirst("listening ".count))))

        let connection = HubConnection(url: url, options: HubConnectionOptions(), logger: quietLogger())
        let transactions = Collector<String>()
        let balances = Collector<Decimal>()
        await connection.on("TransactionCreated") { (args: HubArguments) in
            transactions.append(try args.value(at: 0)["description"]?.stringValue ?? "?")
        }
        await connection.on("BalanceUpdated") { (args: HubArguments) in balances.append(try args.decode(1, as: Decimal.self)) }
        try await connection.start()
        #expect(try await connection.invoke("Echo", ["interop"]) == "interop")
        #expect(try await connection.invoke("start", [3]) == 3)
        #expect(await transactions.wait(for: 3) == ["from aiosignalr 0", "from aiosignalr 1", "from aiosignalr 2"])
        #expect(await balances.wait(for: 3) == Array(repeating: Decimal(string: "26.75")!, count: 3))
        await connection.stop()
    }
}

/// Reads one line from a pipe (the peer's `listening ...` line), waiting up to 20 s.
func readLine(from handle: FileHandle) -> String? {
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
