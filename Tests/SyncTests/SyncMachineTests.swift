import Testing

@testable import Sync

/// The sync engine's decisions, driven without a store, a server or a clock.
@Suite struct SyncMachineTests {
    @Test func requestsDuringACatchUpAreOneMoreRound() {
        var m = SyncMachine()
        let r1 = m.requestCatchUp()
        #expect(r1 == .start)
        m.roundBegins()
        let r2 = m.requestCatchUp()
        #expect(r2 == .coalesced)
        let r3 = m.requestCatchUp()
        #expect(r3 == .coalesced)
        let r4 = m.roundEnded(failed: false)
        #expect(r4 == .again, "the requests made during the round ask for one more")
        m.roundBegins()
        let r5 = m.roundEnded(failed: false)
        #expect(r5 == .done, "and only one")
        #expect(m.catchUp == .idle)
        let r6 = m.requestCatchUp()
        #expect(r6 == .start, "the next request starts the loop again")
    }

    @Test func aFailedRoundIsRetried() {
        var m = SyncMachine()
        _ = m.requestCatchUp()
        m.roundBegins()
        let r7 = m.roundEnded(failed: true)
        #expect(r7 == .again)
        #expect(m.catchUp == .running)
    }

    @Test func aFetchAndADrainNeverOverlap() {
        var m = SyncMachine()
        let r8 = m.beginDrain()
        #expect(r8 == .granted)
        let r9 = m.beginFetch()
        #expect(r9 == .busy, "the fetch waits for the drain")
        let r10 = m.beginDrain()
        #expect(r10 == .busy, "one drain at a time")
        m.endDrain()
        let r11 = m.beginFetch()
        #expect(r11 == .granted)
        let r12 = m.beginDrain()
        #expect(r12 == .busy, "a drain during the fetch is the catch-up's own, after it")
        m.endFetch()
        let r13 = m.beginDrain()
        #expect(r13 == .granted)
        m.endFetch()  // not fetching: changes nothing
        #expect(m.work == .draining)
    }

    @Test func afterAConflictNothingIsFetchedOrSent() {
        var m = SyncMachine()
        _ = m.requestCatchUp()
        m.roundBegins()
        let r14 = m.requestCatchUp()
        #expect(r14 == .coalesced)
        let r15 = m.enterConflict("another server")
        #expect(r15 == .new)
        let r16 = m.enterConflict("again")
        #expect(r16 == .known, "said once")
        let r17 = m.roundEnded(failed: true)
        #expect(r17 == .done, "no more rounds, even one asked for or failed")
        let r18 = m.requestCatchUp()
        #expect(r18 == .refused)
        let r19 = m.beginDrain()
        #expect(r19 == .refused)
        #expect(m.conflict == "another server")
    }
}
