import AllowanceAPI
import Foundation
import Store
import Sync
import TestSupport
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The simulator for trying things: `--state FILE` keeps its family across restarts (the same backend comes back,
/// not a reset one), and `/_sim/down` takes REST and the hub down together until `/_sim/up`.
@Suite(.serialized, .timeLimit(.minutes(1))) struct SimulatorStateTests {
    func status(_ base: URL, _ method: String, _ path: String) async throws -> Int {
        var request = URLRequest(url: URL(string: base.absoluteString + path)!)
        request.httpMethod = method
        request.setValue("Bearer store-token", forHTTPHeaderField: "Authorization")
        return (try await TestHTTP.data(for: request).1 as? HTTPURLResponse)?.statusCode ?? 0
    }

    @Test func aRestartedSimulatorWithItsStateIsTheSameBackend() async throws {
        let file = FileManager.default.temporaryDirectory.appending(path: "sim-state-\(UUID()).json").path
        let store = try Store.open(path: temporaryStorePath())
        try await TestSupport.withSimulator(token: "store-token", { $0.stateFile = file }) { base in
            try await post(base, "/_sim/burst?count=5")
            #expect(
                try await CatchUp(store: store, api: APIClient(baseURL: base, token: "store-token")).run().stored == 5)
        }
        let balances = try store.children().map(\.currentBalance)
        try await TestSupport.withSimulator(token: "store-token", { $0.stateFile = file }) { base in
            let api = APIClient(baseURL: base, token: "store-token")
            #expect(try await api.children().map(\.currentBalance) == balances, "the same family, as it was")
            try await post(base, "/_sim/burst?count=2")
            // Not a reset backend handing out the same ids: the cache carries on, no conflict.
            #expect(try await CatchUp(store: store, api: api).run().stored == 2)
        }
        #expect(try store.transactions(limit: 100).count == 7)
    }

    @Test func downTakesRESTAndTheHubDownTogetherUntilUp() async throws {
        try await withSimulator { base in
            #expect(try await status(base, "GET", "/api/v1/children") == 200)
            try await post(base, "/_sim/down")
            #expect(try await status(base, "GET", "/api/v1/children") == 503)
            #expect(try await status(base, "GET", "/api/v1/auth/me") == 503)
            #expect(try await status(base, "POST", "/hubs/family/negotiate?negotiateVersion=1") == 503)
            try await post(base, "/_sim/up")
            #expect(try await status(base, "GET", "/api/v1/children") == 200)
            #expect(try await status(base, "POST", "/hubs/family/negotiate?negotiateVersion=1") == 200)
        }
    }
}
