import AllowanceAPI
import Foundation
import Logging
import SignalRProtocol
import Store
import Sync
import Testing

/// The outbox drain against the real simulator: each class of answer leads to the documented outcome.
@Suite(.serialized, .timeLimit(.minutes(1))) struct OutboxDrainTests {
    private let logger = Logger(label: "sync-test")

    /// A store that knows the family (one catch-up), with the drain's coordinator.
    private func setUp(
        _ base: URL, limits: SyncCoordinator.OutboxLimits = .init()
    ) async throws -> (Store, SyncCoordinator, APIClient) {
        let store = try Store.open(path: temporaryStorePath())
        let api = APIClient(baseURL: base, token: "store-token")
        _ = try await CatchUp(store: store, api: api).run()
        return (store, SyncCoordinator(store: store, api: api, limits: limits, logger: logger), api)
    }

    private func serverBalance(_ api: APIClient) async throws -> Decimal? {
        try await api.children().first { $0.id == alice }?.currentBalance
    }

    @Test func aServerErrorWaitsAndTheNextDrainSendsTheWriteOnce() async throws {
        try await withSimulator { base in
            let (store, sync, api) = try await setUp(base)
            let before = try #require(try await serverBalance(api))
            let w = try store.enqueueTransaction(child: alice, amount: 5, type: .credit, description: "chores")
            try await post(base, "/_sim/rest?mode=503&count=1")
            let first = await sync.drainOutbox()
            #expect(!first.ok && first.sent == 0)
            let waiting = try #require(try store.outbox().first)
            #expect(waiting.state == .pending && waiting.attempts == 1 && waiting.lastError?.contains("503") == true)
            #expect(try store.dueOutbox().isEmpty, "Retry-After: 1 puts the next attempt in the future")
            // The next attempt falls due when the server said (Retry-After: 1): wait for that, not a guessed time.
            for _ in 0..<500 {  // at most 10 s
                let dueNow = try store.dueOutbox()
                if !dueNow.isEmpty { break }
                try await Task.sleep(for: .milliseconds(20))
            }
            #expect(await sync.drainOutbox().sent == 1)
            #expect(try store.outbox().first { $0.seq == w.seq }?.state == .sent)
            #expect(try await serverBalance(api) == before + 5, "applied once")
        }
    }

    /// Two writes queued while the backend failed: the second waits for the first (the server sees them in the
    /// order they were made), and a new hub connection sends both at once instead of at the end of the back-off.
    @Test func writesReachTheServerInTheOrderTheyWereMade() async throws {
        try await withSimulator { base in
            let (store, sync, api) = try await setUp(base)
            let a = try store.enqueueTransaction(child: alice, amount: 1, type: .credit, description: "first")
            let b = try store.enqueueTransaction(child: alice, amount: 2, type: .credit, description: "second")
            try await post(base, "/_sim/rest?mode=503&count=1")
            #expect(await sync.drainOutbox().sent == 0)
            try store.outboxRetry(a.seq, error: "HTTP 503", retryAt: Date().addingTimeInterval(600))  // a long back-off
            #expect(await sync.drainOutbox().sent == 0, "the second write waits for the first")
            #expect(try store.outbox().first { $0.seq == b.seq }?.state == .pending)
            await sync.linkRestored()
            for _ in 0..<100 where try store.outbox().contains(where: { $0.state != .sent }) {
                try await Task.sleep(for: .milliseconds(50))
            }
            #expect(try store.outbox().map(\.state) == [.sent, .sent], "sent as soon as the link is back")
            let newestFirst = try await api.transactions(child: alice, limit: 2, offset: 0).map(\.description)
            #expect(newestFirst == ["second", "first"])
            let status = try #require(try store.syncStatus())
            #expect(status.phase == .idle && status.nextRetry == nil, "\(status)")
        }
    }

    @Test func aConflictIsUndoneLocallyAndDoesNotBlockTheWritesBehindIt() async throws {
        try await withSimulator { base in
            let (store, sync, api) = try await setUp(base)
            let before = try #require(try await serverBalance(api))
            let a = try store.enqueueTransaction(child: alice, amount: 5, type: .credit, description: "conflicting")
            let b = try store.enqueueTransaction(child: alice, amount: 2, type: .debit, description: "fine")
            try await post(base, "/_sim/rest?mode=409&count=1")
            let result = await sync.drainOutbox()
            #expect(result.ok && result.sent == 1)
            let rows = try store.outbox()
            #expect(rows.first { $0.seq == a.seq }?.state == .rejected)
            #expect(rows.first { $0.seq == a.seq }?.lastError?.contains("409") == true)
            #expect(rows.first { $0.seq == b.seq }?.state == .sent)
            #expect(try await serverBalance(api) == before - 2)
            #expect(try store.children().first { $0.id == alice }?.currentBalance == before - 2, "the server wins")
            #expect(try store.transactions(child: alice).allSatisfy { $0.description != "conflicting" })
        }
    }

    @Test func aWriteThatKeepsFailingIsGivenUpAfterMaxAttempts() async throws {
        try await withSimulator { base in
            let (store, sync, api) = try await setUp(base, limits: .init(maxAttempts: 2))
            let before = try #require(try await serverBalance(api))
            let w = try store.enqueueTransaction(child: alice, amount: 5, type: .credit, description: "doomed")
            try await post(base, "/_sim/rest?mode=fail&count=10")
            for _ in 0..<3 {
                _ = await sync.drainOutbox()
                // Make the back-off elapse at once: the test is about the count of attempts, not the wait.
                if try store.outbox().first?.state == .pending {
                    try store.outboxRetry(w.seq, error: "waited", retryAt: .distantPast)
                }
            }
            let dead = try #require(try store.outbox().first)
            #expect(dead.state == .dead && dead.attempts == 2)
            #expect(dead.lastError?.hasPrefix("given up after 2 attempt(s)") == true)
            #expect(
                try store.children().first { $0.id == alice }?.currentBalance == before, "the local effect is undone")
        }
    }

    @Test func aWriteOlderThanMaxAgeIsGivenUpWithoutBeingSent() async throws {
        try await withSimulator { base in
            let (store, sync, api) = try await setUp(base, limits: .init(maxAge: 60))
            let before = try #require(try await serverBalance(api))
            _ = try store.enqueueTransaction(
                child: alice, amount: 5, type: .credit, description: "stale", at: Date().addingTimeInterval(-120))
            #expect(await sync.drainOutbox().sent == 0)
            #expect(try store.outbox().first?.state == .dead)
            #expect(try await serverBalance(api) == before, "never sent")
        }
    }

    /// A write must not reach the server in the middle of a catch-up's requests: the balance it stores would come
    /// from a snapshot that has the write in one half and not the other. A drain asked meanwhile is left to the
    /// catch-up, which sends the write once its snapshot is stored; the balance then is the server's.
    @Test func aDrainDuringACatchUpWaitsForItAndTheBalanceIsTheServers() async throws {
        try await withSimulator { base in
            let (store, sync, api) = try await setUp(base)
            let w = try store.enqueueTransaction(
                child: alice, amount: 5, type: .credit, description: "during the catch-up")
            // the catch-up takes several requests of 150 ms
            try await post(base, "/_sim/rest?mode=slow&ms=150&count=100")
            await sync.requestCatchUp()
            // The catch-up has begun (its state says so) before the drain is asked for.
            for _ in 0..<2000 {  // at most 10 s
                let phase = try store.syncStatus()?.phase
                if phase == .syncing { break }
                try await Task.sleep(for: .milliseconds(5))
            }
            #expect(try store.syncStatus()?.phase == .syncing)
            #expect(await sync.drainOutbox().sent == 0, "left to the catch-up")
            for _ in 0..<200 where try store.syncStatus()?.phase != .idle {
                try await Task.sleep(for: .milliseconds(50))
            }
            #expect(try store.outbox().first { $0.seq == w.seq }?.state == .sent)
            let server = try #require(try await serverBalance(api))
            #expect(try store.children().first { $0.id == alice }?.currentBalance == server)
            let sent = try await api.transactions(child: alice, limit: 10, offset: 0).filter {
                $0.description == "during the catch-up"
            }
            #expect(sent.count == 1)
        }
    }
}
