import AllowanceAPI
import Foundation
import SignalRProtocol
import Store
import Sync
import TestSupport
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

func temporaryStorePath() -> String {
    FileManager.default.temporaryDirectory.appending(path: "sync-\(UUID())").appending(path: "relay.sqlite").path
}

let alice = UUID(uuidString: "11111111-1111-4111-8111-111111111111")!

func withSimulator(_ body: (URL) async throws -> Void) async throws {
    try await TestSupport.withSimulator(token: "store-token", { _ in }, body)
}

func post(_ base: URL, _ path: String) async throws {
    var request = URLRequest(url: URL(string: base.absoluteString + path)!)
    request.httpMethod = "POST"
    _ = try await TestHTTP.data(for: request)
}

@Suite(.serialized, .timeLimit(.minutes(1))) struct CatchUpTests {
    @Test func catchesUpEverythingTheServerCreatedWhileWeWereAway() async throws {
        try await withSimulator { base in
            let store = try Store.open(path: temporaryStorePath())
            let api = APIClient(baseURL: base, token: "store-token")
            try await post(base, "/_sim/burst?count=250")
            let first = try await CatchUp(store: store, api: api, pageSize: 40).run()
            #expect(first.stored == 250)
            #expect(try store.transactions(limit: 1000).count == 250)
            try await post(base, "/_sim/burst?count=30")
            let second = try await CatchUp(store: store, api: api, pageSize: 40).run()
            #expect(second.stored == 30, "only what is new is fetched")
            // Balances equal the server's, and each child's newest transaction agrees with it.
            for c in try await api.children() {
                let cached = try #require(try store.children().first { $0.id == c.id })
                #expect(cached.currentBalance == c.currentBalance)
                if let newest = try store.transactions(child: c.id, limit: 1).first {
                    #expect(newest.balanceAfter == c.currentBalance)
                }
            }
            #expect(try store.inbox().isEmpty, "a caught-up transaction's record is its row")
            #expect(try await CatchUp(store: store, api: api).run().stored == 0, "idempotent")
        }
    }
}

@Suite(.serialized, .timeLimit(.minutes(1))) struct CatchUpCursorTests {
    /// A live event stored while an older one was skipped (it came before the children were known) must not
    /// make the next catch-up stop early: catch-up stops at its own cursor, not at any known transaction.
    @Test func aTransactionSkippedBeforeANewerOneWasStoredIsStillCaughtUp() async throws {
        try await withSimulator { base in
            let store = try Store.open(path: temporaryStorePath())
            let api = APIClient(baseURL: base, token: "store-token")
            try await post(base, "/_sim/burst?count=1")  // needed so that the first catch-up sets a cursor
            #expect(try await CatchUp(store: store, api: api).run().stored == 1)
            for d in ["older, skipped", "newer, stored live"] {
                var request = URLRequest(url: base.appending(path: "api/v1/transactions"))
                request.httpMethod = "POST"
                request.setValue("Bearer store-token", forHTTPHeaderField: "Authorization")
                request.httpBody = Data(
                    #"{"childId":"11111111-1111-4111-8111-111111111111","amount":1,"type":"Credit","description":"\#(d)"}"#
                        .utf8)
                _ = try await TestHTTP.data(for: request)
            }
            let newest = try await api.transactions(child: alice, limit: 1, offset: 0)
            #expect(try store.apply(.transactionCreated(newest[0])) != .duplicate)  // only the newer one arrives live
            _ = try await CatchUp(store: store, api: api).run()
            let descriptions = Set(try store.transactions(child: alice, limit: 10).map(\.description))
            #expect(descriptions.contains("older, skipped"), "\(descriptions)")
            #expect(try store.transactions(limit: 100).count == 3)
        }
    }
}
