import AllowanceAPI
import Foundation
import SignalRClient
import Synchronization
import Testing

/// The queue between the hub handler and the store: order kept, bursts taken at once, bounded, drained at the end.
@Suite struct HubEventBufferTests {
    func event(_ i: Int) -> HubEvent { .balanceUpdated(childId: UUID(), balance: Decimal(i)) }

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
        try await Task.sleep(for: .milliseconds(200))
        #expect(appended.load(ordering: .relaxed) == 3, "the fourth append waits for room")
        #expect(await queue.next()?.count == 3)
        await producer.value
        #expect(appended.load(ordering: .relaxed) == 5)
        #expect(await queue.next()?.compactMap(balance) == [3, 4])
    }

    @Test func aWaitingWriterWakesOnTheFirstEvent() async throws {
        let queue = HubEventBuffer<HubEvent>()
        let writer = Task { await queue.next() }
        try await Task.sleep(for: .milliseconds(50))
        await queue.append(event(9))
        #expect(await writer.value?.compactMap(balance) == [9])
    }
}
