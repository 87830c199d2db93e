import AllowanceAPI
import Foundation
import Logging
import SignalRProtocol
import Store
import Sync
import Synchronization
import Testing

/// The queue between the hub handler and the store: order kept, bursts taken at once, bounded, drained at the end.
@Suite struct HubEventBufferTests {
    func event(_ i: Int) -> HubEvent { .balanceUpdated(childId: UUID(), balance: Decimal(i)) }

    /// Waits until `condition` holds, up to 10 s; an issue when it never does.
    func until(_ what: String, _ condition: () -> Bool) async {
        let deadline = ContinuousClock.now + .seconds(10)
        while !condition() {
            guard ContinuousClock.now < deadline else {
                Issue.record("never happened: \(what)")
                return
            }
            try? await Task.sleep(for: .milliseconds(1))
        }
    }

    func balance(_ e: HubEvent) -> Decimal? {
        if case .balanceUpdated(_, let b) = e { return b }
        return nil
    }

    @Test func aBurstIsTakenAtOnceInOrder() async {
        let queue = HubEventBuffer<HubEvent>()
        for i in 0..<5 { await queue.append(event(i)) }
        let batch = await queue.next(limit: 1000)
        #expect(batch?.compactMap(balance) == [0, 1, 2, 3, 4])
        for i in 5..<8 { await queue.append(event(i)) }
        #expect(await queue.next(limit: 2)?.compactMap(balance) == [5, 6])
        #expect(await queue.next(limit: 2)?.compactMap(balance) == [7])
    }

    @Test func finishDrainsWhatIsLeftThenEnds() async {
        let queue = HubEventBuffer<HubEvent>()
        await queue.append(event(1))
        queue.finish()
        #expect(await queue.next()?.count == 1)
        #expect(await queue.next() == nil)
    }

    @Test func aFullQueueHoldsTheProducerUntilTheWriterTakes() async throws {
        let queue = HubEventBuffer<HubEvent>(capacity: 3)
        let appended = Atomic<Int>(0)
        let producer = Task {
            for i in 0..<5 {
                await queue.append(event(i))
                appended.add(1, ordering: .relaxed)
            }
        }
        await until("the producer waits for room") { queue.isHoldingBackProducer }
        #expect(appended.load(ordering: .relaxed) == 3, "the fourth append waits for room")
        #expect(await queue.next()?.count == 3)
        await producer.value
        #expect(appended.load(ordering: .relaxed) == 5)
        #expect(await queue.next()?.compactMap(balance) == [3, 4])
    }

    @Test func aWaitingWriterWakesOnTheFirstEvent() async throws {
        let queue = HubEventBuffer<HubEvent>()
        let writer = Task { await queue.next() }
        await until("the writer waits") { queue.hasWaitingConsumer }
        await queue.append(event(9))
        #expect(await writer.value?.compactMap(balance) == [9])
    }

    /// `next(within:)`: what arrives in time is taken, nothing in time gives [], a finished buffer gives nil; a
    /// deadline that passed does not cut a later wait short.
    @Test func aWaitWithADeadlineTakesWhatComesInTimeAndOtherwiseNothing() async throws {
        let queue = HubEventBuffer<HubEvent>()
        let started = ContinuousClock.now
        #expect(await queue.next(within: .milliseconds(20)) == [])
        #expect(ContinuousClock.now - started >= .milliseconds(20))
        let writer = Task { await queue.next(within: .seconds(30)) }
        await until("the writer waits") { queue.hasWaitingConsumer }
        await queue.append(event(4))
        #expect(await writer.value?.compactMap(balance) == [4])
        let later = Task { await queue.next(within: .seconds(30)) }
        await until("the second wait") { queue.hasWaitingConsumer }
        await queue.append(event(5))
        #expect(await later.value?.compactMap(balance) == [5], "the first wait's deadline is not this one's")
        queue.finish()
        #expect(await queue.next(within: .seconds(30)) == nil)
    }

    /// The store writer stores each burst the connection handed over in one batch (one commit). The hub events'
    /// decoder asks the connection to hold a TransactionCreated for the BalanceUpdated behind it, so that a transaction
    /// and its balance are one burst (the connection's side: SignalRClientTests' FollowerHoldTests).
    @Test func aTransactionAndItsBalanceAreStoredInOneBatch() async throws {
        let decoder = HubEvent.decoder { _ in }
        let store = try Store.open(path: temporaryStorePath())
        try store.storeCaughtUp(
            children: [Child(id: alice, firstName: "Alice", lastName: "E", weeklyAllowance: 10, currentBalance: 50)],
            transactions: [])
        let sync = SyncCoordinator(
            store: store, api: APIClient(baseURL: URL(string: "http://127.0.0.1:9")!, token: "t"),
            logger: Logger(label: "t"))
        let queue = HubEventBuffer<HubEvent>()
        let batches = Mutex<[Int]>([])
        let writer = Task {
            await sync.store(from: queue) { batch in batches.withLock { $0.append(batch.count) } }
        }
        func transaction(_ balance: Decimal) -> Transaction {
            Transaction(
                id: UUID(), childId: alice, amount: 1, type: .credit, description: "x", balanceAfter: balance,
                createdAt: Date(),
                createdByName: "Pat")
        }
        let created = HubEvent.transactionCreated(transaction(51))
        let balance = HubEvent.balanceUpdated(childId: alice, balance: 51)
        #expect(decoder.isFollowed(created) && !decoder.isFollowed(balance))
        #expect(decoder.followerWait == HubEvent.balanceFollows && HubEvent.balanceFollows > .zero)
        await queue.append(contentsOf: [created, balance])
        await queue.append(.transactionCreated(transaction(52)))
        queue.finish()
        await writer.value
        #expect(
            batches.withLock { $0 } == [2, 1] || batches.withLock { $0 } == [3],
            "each hand-over whole: \(batches.withLock { $0 })")
        #expect(try store.children().first?.currentBalance == 52)
    }
}
