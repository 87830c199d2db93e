import Core
import Foundation
import Synchronization
import TestSupport
import Testing

/// A blocking call runs on a thread of its own, named, and its answer or its typed error comes back.
@Suite struct OffThreadTests {
    struct Refused: Error, Equatable { let code: Int }

    @Test func theCallRunsOnANamedThreadAndItsAnswerComesBack() async {
        let caller = ProcessThreads.current()
        let name = await offThread(named: "blocking-call") { ProcessThreads.current() }
        #expect(name == "blocking-call")
        #expect(caller != "blocking-call")
    }

    @Test func aTypedErrorComesBackAsItself() async {
        do throws(Refused) {
            _ = try await offThread(named: "blocking-call") { () throws(Refused) -> Int in throw Refused(code: 7) }
            Issue.record("no error came back")
        } catch {
            #expect(error == Refused(code: 7))
        }
    }

    /// Calls that block longer than the pool has threads do not queue behind each other: each has its own thread.
    @Test func blockingCallsDoNotWaitForEachOther() async {
        final class Gauge: Sendable {
            let inside = Atomic<Int>(0)
            let most = Atomic<Int>(0)
        }
        let gauge = Gauge()
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<8 {
                group.addTask {
                    await offThread(named: "blocking-call") {
                        let now = gauge.inside.add(1, ordering: .relaxed).newValue
                        gauge.most.max(now, ordering: .relaxed)
                        usleep(300_000)
                        gauge.inside.subtract(1, ordering: .relaxed)
                    }
                }
            }
        }
        #expect(gauge.most.load(ordering: .relaxed) == 8, "all eight blocked at once")
    }
}
