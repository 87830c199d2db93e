import Foundation
import Testing

@testable import Sync

/// When the wish lists are read, on a clock the test sets: the REST load stays bounded whatever the hub sends.
@Suite struct WishListScheduleTests {
    let start = ContinuousClock.now
    let alice = UUID()
    let bob = UUID()

    @Test func nothingIsReadBeforeACatchUpThenEveryChildThenOnlyWhatWasAskedFor() {
        var s = WishListSchedule(spacing: .seconds(5), every: .seconds(1800))
        let before = s.next(at: start)
        #expect(before.read.isEmpty && before.wake == nil, "a replica that stands by never catches up: it reads none")
        s.caughtUp(known: [alice, bob], at: start)
        let first = s.next(at: start)
        #expect(Set(first.read) == [alice, bob])
        #expect(first.wake == start + .seconds(1800), "nothing asked: the next round")
        #expect(s.next(at: start + .seconds(1)).read.isEmpty)
    }

    @Test func aBurstOfBalanceMovesCostsOneReadPerChildPerSpacing() {
        var s = WishListSchedule(spacing: .seconds(5), every: .seconds(1800))
        s.caughtUp(known: [alice], at: start)
        _ = s.next(at: start)
        var reads = 0
        // A thousand moves over ten seconds, one every 10 ms, looked at after each.
        for i in 1...1000 {
            let now = start + .milliseconds(10 * i)
            s.ask(alice, at: now)
            reads += s.next(at: now).read.count
        }
        #expect(reads == 2, "at 5 s and at 10 s, not a thousand")
        s.ask(alice, at: start + .milliseconds(10_001))
        let after = s.next(at: start + .milliseconds(10_001))
        #expect(after.read.isEmpty && after.wake == start + .seconds(15), "the last move is read at the next slot")
    }

    @Test func aChildNotReadForAWhileIsReadAtOnceAndEveryRoundReadsAll() {
        var s = WishListSchedule(spacing: .seconds(5), every: .seconds(60))
        s.caughtUp(known: [alice, bob], at: start)
        _ = s.next(at: start)
        s.ask(bob, at: start + .seconds(30))
        #expect(s.next(at: start + .seconds(30)).read == [bob])
        #expect(!s.roundDue(at: start + .seconds(59)), "the children are not read for a round before it is due")
        #expect(s.roundDue(at: start + .seconds(60)))
        s.caughtUp(known: [alice, bob], at: start + .seconds(60))
        #expect(Set(s.next(at: start + .seconds(60)).read) == [alice, bob])
    }
}
