import AllowanceAPI
import Foundation
import SignalRProtocol
import TestSupport
import GRDB
@testable import Store
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

func temporaryStorePath() -> String {
    FileManager.default.temporaryDirectory.appending(path: "store-\(UUID())").appending(path: "relay.sqlite").path
}

let alice = UUID(uuidString: "11111111-1111-4111-8111-111111111111")!

func child(_ balance: String) -> Child {
    Child(id: alice, firstName: "Alice", lastName: "Example", weeklyAllowance: 10, currentBalance: Decimal(string: balance)!)
}

func transaction(_ n: Int, amount: String, type: TransactionType = .credit, after: String) -> Transaction {
    Transaction(
        id: UUID(uuidString: String(format: "00000000-0000-4000-8000-%012d", n))!, childId: alice,
        amount: Decimal(string: amount)!, type: type, description: "t\(n)", balanceAfter: Decimal(string: after)!,
        createdAt: Date(timeIntervalSince1970: 1_795_341_600 + Double(n)), createdByName: "Pat")
}

@Suite struct StoreTests {
    @Test func opensMigratesAndReopensWithTheData() throws {
        let path = temporaryStorePath()
        do {
            let store = try Store.open(path: path)
            #expect(try store.appliedMigrations() == ["v1: children, transactions, inbox, sync state", "v2: outbox"])
            try store.storeCaughtUp(children: [child("25.50")], transactions: [])
        }
        let again = try Store.open(path: path)
        #expect(try again.children().map(\.currentBalance) == [Decimal(string: "25.50")!])
    }

    @Test func aDatabaseFromAnOlderSchemaIsMigratedWithItsData() throws {
        let path = temporaryStorePath()
        try FileManager.default.createDirectory(atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        do {
            // What version 1 of the relay left behind.
            let old = try DatabaseQueue(path: path)
            try Schema.migrator.migrate(old, upTo: "v1: children, transactions, inbox, sync state")
            try old.write { db in
                try db.execute(sql: "INSERT INTO child VALUES ('11111111-1111-4111-8111-111111111111', 'Alice', 'Example', 1000, 2550, '2026-01-01T00:00:00Z')")
            }
        }
        let store = try Store.open(path: path)
        #expect(try store.appliedMigrations() == ["v1: children, transactions, inbox, sync state", "v2: outbox"])
        #expect(try store.children().first?.currentBalance == Decimal(string: "25.50")!)
        _ = try store.enqueueTransaction(child: alice, amount: 1, type: .credit, description: "uses v2")
    }

    @Test func theSameTransactionTwiceIsOneRow() throws {
        let store = try Store.open(path: temporaryStorePath())
        try store.storeCaughtUp(children: [child("25.50")], transactions: [])
        let t = transaction(1, amount: "19.99", after: "45.49")
        #expect(try store.apply(.transactionCreated(t)) == .stored(gap: nil))
        #expect(try store.apply(.transactionCreated(t)) == .duplicate)
        #expect(try store.transactions().count == 1)
        #expect(try store.inbox().count == 1)
        #expect(try store.children().first?.currentBalance == Decimal(string: "45.49")!)
    }

    @Test(arguments: ["0.1", "19.99", "0.01", "12345678.91"])
    func moneyIsExact(_ amount: String) throws {
        let store = try Store.open(path: temporaryStorePath())
        try store.storeCaughtUp(children: [child("0")], transactions: [])
        let t = transaction(7, amount: amount, after: amount)
        _ = try store.apply(.transactionCreated(t))
        let stored = try #require(try store.transactions().first)
        #expect(stored.amount == Decimal(string: amount)!)
        #expect(stored.balanceAfter == Decimal(string: amount)!)
    }

    @Test func moreThanTwoDecimalsIsRefusedNotRounded() throws {
        let store = try Store.open(path: temporaryStorePath())
        try store.storeCaughtUp(children: [child("0")], transactions: [])
        #expect(throws: StoreError.self) { try store.apply(.transactionCreated(transaction(1, amount: "1.005", after: "1.005"))) }
        #expect(try store.transactions().isEmpty, "nothing half-written")
        #expect(try store.inbox().isEmpty)
    }

    @Test func aTransactionThatDoesNotFollowTheCachedBalanceIsAGap() throws {
        let store = try Store.open(path: temporaryStorePath())
        try store.storeCaughtUp(children: [child("25.50")], transactions: [])
        // 25.50 + 5.00 should give 30.50; 40.00 means something in between was missed.
        #expect(try store.apply(.transactionCreated(transaction(1, amount: "5.00", after: "40.00"))) == .stored(gap: alice))
        #expect(try store.apply(.balanceUpdated(childId: alice, balance: Decimal(string: "40.00")!)) == .stored(gap: nil))
        #expect(try store.apply(.balanceUpdated(childId: alice, balance: Decimal(string: "41.00")!)) == .stored(gap: alice))
        #expect(try store.children().first?.currentBalance == Decimal(string: "41.00")!, "the server's balance wins")
    }

    @Test func eventsTheCacheCannotPlaceAskForACatchUp() throws {
        let store = try Store.open(path: temporaryStorePath())
        let idOnly = try store.apply(.transactionCreatedId(UUID()))
        let unknownChild = try store.apply(.transactionCreated(transaction(1, amount: "1", after: "1")))
        for result in [idOnly, unknownChild] {
            guard case .needsCatchUp = result else {
                Issue.record("expected a catch-up request, got \(result)")
                continue
            }
        }
    }

    @Test func aCorruptFileGivesAnErrorNamingItAndTheFix() throws {
        let path = temporaryStorePath()
        try FileManager.default.createDirectory(atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        try Data(repeating: 0x42, count: 8192).write(to: URL(fileURLWithPath: path))
        do {
            _ = try Store.open(path: path)
            Issue.record("opened garbage")
        } catch {
            #expect(error.path == path)
            #expect(error.message.contains("allowance-relay run --rebuild"))
        }
        let aside = try Store.moveAside(path: path)
        #expect(FileManager.default.fileExists(atPath: aside))
        #expect(try Store.open(path: path).children().isEmpty, "a fresh database after moving the broken one aside")
    }
}

@Suite(.serialized, .timeLimit(.minutes(1))) struct CatchUpTests {
    @Test func catchesUpEverythingTheServerCreatedWhileWeWereAway() async throws {
        try await withSimulator { base in
            let store = try Store.open(path: temporaryStorePath())
            let api = APIClient(baseURL: base, token: { "store-token" })
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
            #expect(try store.inbox().allSatisfy { $0.caughtUp }, "caught-up rows are marked so the relay can digest them")
            #expect(try await CatchUp(store: store, api: api).run().stored == 0, "idempotent")
        }
    }
}

func withSimulator(_ body: (URL) async throws -> Void) async throws {
    try await TestSupport.withSimulator(token: "store-token", { _ in }, body)
}

func post(_ base: URL, _ path: String) async throws {
    var request = URLRequest(url: URL(string: base.absoluteString + path)!)
    request.httpMethod = "POST"
    _ = try await URLSession.shared.data(for: request)
}

@Suite(.serialized, .timeLimit(.minutes(1))) struct CatchUpCursorTests {
    /// A live event stored while an older one was skipped (it came before the children were known) must not
    /// make the next catch-up stop early: catch-up stops at its own cursor, not at any known transaction.
    @Test func aTransactionSkippedBeforeANewerOneWasStoredIsStillCaughtUp() async throws {
        try await withSimulator { base in
            let store = try Store.open(path: temporaryStorePath())
            let api = APIClient(baseURL: base, token: { "store-token" })
            try await post(base, "/_sim/burst?count=1")  // needed so that the first catch-up sets a cursor
            #expect(try await CatchUp(store: store, api: api).run().stored == 1)
            for d in ["older, skipped", "newer, stored live"] {
                var request = URLRequest(url: base.appending(path: "api/v1/transactions"))
                request.httpMethod = "POST"
                request.setValue("Bearer store-token", forHTTPHeaderField: "Authorization")
                request.httpBody = Data(#"{"childId":"11111111-1111-4111-8111-111111111111","amount":1,"type":"Credit","description":"\#(d)"}"#.utf8)
                _ = try await URLSession.shared.data(for: request)
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
