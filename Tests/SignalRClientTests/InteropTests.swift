import Foundation
import SignalRClient
import SignalRProtocol
import TestSupport
import Testing

@Suite(
    .serialized, .timeLimit(.minutes(2)),
    .enabled(if: PythonPeer.available, "needs .venv with the peers: make test creates it"))
struct InteropTests {
    /// Our client against aiosignalr, a Python server nobody here wrote, which sends JSON in Binary frames.
    @Test func ourClientReceivesInvocationsFromAiosignalr() async throws {
        let peer = try await PythonPeer(script: "aiosignalr_server.py")
        defer { peer.stop() }
        let url = try #require(URL(string: peer.address))

        let connection = HubConnection(url: url, options: HubConnectionOptions(), logger: quietLogger())
        let transactions = Collector<String>()
        let balances = Collector<Decimal>()
        await connection.on("TransactionCreated") { (args: HubArguments) in
            transactions.append(try args.value(at: 0)["description"]?.stringValue ?? "?")
        }
        await connection.on("BalanceUpdated") { (args: HubArguments) in
            balances.append(try args.decode(1, as: Decimal.self))
        }
        try await connection.start()
        #expect(try await connection.invoke("Echo", ["interop"]) == "interop")
        #expect(try await connection.invoke("start", [3]) == 3)
        #expect(await transactions.wait(for: 3) == ["from aiosignalr 0", "from aiosignalr 1", "from aiosignalr 2"])
        #expect(await balances.wait(for: 3) == Array(repeating: Decimal(string: "26.75")!, count: 3))
        await connection.stop()
    }
}
