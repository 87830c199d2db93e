import AllowanceAPI
import Foundation
import GRDB
import Store
import StoreContract
import Testing

@testable import Relay

/// A sink worker's dispatch decisions, driven without a ledger, a planner, a clock or a network.
@Suite struct DispatchMachineTests {
    let now = Date(timeIntervalSince1970: 1_764_000_000)
    let clock = ContinuousClock.now
    let none = DispatchMachine.InProgress()

    /// A ledger row as the ledger reads it.
    func row(_ id: String, child: String? = "c1", due: Date? = nil, digest: Bool = false) -> Delivery {
        let childId = child.map { "11111111-1111-4111-8111-\(String(repeating: "0", count: 10))\($0)" }
        return try! Delivery(
            row: Row([
                "id": id, "sink": "s", "rule": "r", "kind": "transaction.created", "child_id": childId,
                "urgency": "normal",
                "alert": "{}", "digest": digest, "state": "pending", "attempts": 0,
                "next_attempt_at": ISODate.string(due ?? now),
                "last_error": nil, "created_at": ISODate.string(now), "delivered_at": nil,
            ]))
    }

    func step(
        _ m: inout DispatchMachine, room: Int = 4, pausedUntil: Date? = nil,
        inProgress: DispatchMachine.InProgress? = nil
    ) -> DispatchMachine.Step {
        m.step(now: now, clock: clock, pausedUntil: pausedUntil, room: room, inProgress: inProgress ?? none)
    }

    /// The steady path: a read that found everything, all started, a drained wait, then the planner's rows alone.
    @Test func afterADrainedWaitTheHandedOverRowsGoWithoutAReadOfTheLedger() {
        var m = DispatchMachine(ordersByChild: false)
        #expect(step(&m) == .look(readSwitchedOff: true))
        #expect(
            m.looked(switchedOffRead: .some(nil), at: clock, handedOver: nil, inProgress: none, now: now) == .readLedger
        )
        let first = [row("a"), row("b")]
        m.read(due: first, folded: first, next: nil)
        #expect(step(&m) == .start(first))
        #expect(step(&m) == .drainedWait(nextDue: nil), "everything due has started")
        m.wokeFromDrainedWait(bySignal: true)
        #expect(step(&m) == .look(readSwitchedOff: false), "the switch was read a moment ago")
        let fresh = [row("c")]
        #expect(m.looked(switchedOffRead: nil, at: clock, handedOver: fresh, inProgress: none, now: now) == .handedOver)
        #expect(step(&m) == .start(fresh))
    }

    /// A drained worker woken by a signal with nothing handed over (an outcome written just before it began to
    /// wait, its sends all through) is still drained: it waits again without reading the ledger. Woken by its time,
    /// by a row falling due, or asked to look (the hand-over left incomplete), it reads.
    @Test func aSignalThatBroughtNothingNewLeavesTheWorkerDrained() {
        let later = now.addingTimeInterval(120)
        func drainedAndWoken(bySignal: Bool, nextDue: Date? = nil) -> DispatchMachine {
            var m = DispatchMachine(ordersByChild: false)
            _ = step(&m)
            _ = m.looked(switchedOffRead: .some(nil), at: clock, handedOver: nil, inProgress: none, now: now)
            m.read(due: [row("a")], folded: [row("a")], next: nextDue)
            _ = step(&m)
            #expect(step(&m) == .drainedWait(nextDue: nextDue))
            m.wokeFromDrainedWait(bySignal: bySignal)
            #expect(step(&m) == .look(readSwitchedOff: false))
            return m
        }
        var signalled = drainedAndWoken(bySignal: true, nextDue: later)
        #expect(
            signalled.looked(switchedOffRead: nil, at: clock, handedOver: [], inProgress: none, now: now) == .handedOver
        )
        #expect(step(&signalled) == .drainedWait(nextDue: later), "waits again, the ledger unread")
        var timedOut = drainedAndWoken(bySignal: false)
        #expect(
            timedOut.looked(switchedOffRead: nil, at: clock, handedOver: [], inProgress: none, now: now) == .readLedger)
        var fallenDue = drainedAndWoken(bySignal: true, nextDue: now)
        #expect(
            fallenDue.looked(switchedOffRead: nil, at: clock, handedOver: [], inProgress: none, now: now)
                == .readLedger, "a retry's time has come")
        var asked = drainedAndWoken(bySignal: true)
        #expect(
            asked.looked(switchedOffRead: nil, at: clock, handedOver: nil, inProgress: none, now: now) == .readLedger)
    }

    /// The planner's rows are not enough when one is not due yet, folds into a digest, or the wait was not the
    /// drained one: the ledger is read.
    @Test func handedOverRowsThatNeedTheLedgerAreReadFromIt() {
        for handed in [[row("later", due: now.addingTimeInterval(60))], [row("digest", digest: true)]] {
            var m = DispatchMachine(ordersByChild: false)
            _ = step(&m)
            _ = m.looked(switchedOffRead: .some(nil), at: clock, handedOver: nil, inProgress: none, now: now)
            m.read(due: [row("a")], folded: [row("a")], next: nil)
            _ = step(&m)
            _ = step(&m)
            m.wokeFromDrainedWait(bySignal: true)
            _ = step(&m)
            #expect(
                m.looked(switchedOffRead: nil, at: clock, handedOver: handed, inProgress: none, now: now) == .readLedger
            )
        }
        var woken = DispatchMachine(ordersByChild: false)
        _ = step(&woken)
        #expect(
            woken.looked(switchedOffRead: .some(nil), at: clock, handedOver: [row("x")], inProgress: none, now: now)
                == .readLedger,
            "not after a drained wait: the hand-over may not be all that is new")
    }

    @Test func aPauseDropsTheQueueAndAFullSinkWaits() {
        var m = DispatchMachine(ordersByChild: false)
        _ = step(&m)
        _ = m.looked(switchedOffRead: .some(nil), at: clock, handedOver: nil, inProgress: none, now: now)
        m.read(due: [row("a"), row("b")], folded: [row("a"), row("b")], next: nil)
        #expect(step(&m, room: 0) == .full)
        let until = now.addingTimeInterval(30)
        #expect(step(&m, pausedUntil: until) == .paused(until: until))
        #expect(m.queue.isEmpty && !m.drained, "the queue is read again after the pause")
        #expect(step(&m) == .look(readSwitchedOff: false))
    }

    @Test func aChatSendsOnePerChildAtATimeInOrder() {
        var m = DispatchMachine(ordersByChild: true)
        _ = step(&m)
        _ = m.looked(switchedOffRead: .some(nil), at: clock, handedOver: nil, inProgress: none, now: now)
        let rows = [row("a1", child: "c1"), row("a2", child: "c1"), row("b1", child: "c2")]
        m.read(due: rows, folded: rows, next: nil)
        #expect(step(&m) == .start([rows[0], rows[2]]))
        let busy = DispatchMachine.InProgress(
            ids: ["a1", "b1"], children: [DispatchMachine.childKey(rows[0]), DispatchMachine.childKey(rows[2])])
        #expect(step(&m, inProgress: busy) == .wait(until: nil), "a2 waits for a1")
        #expect(
            step(&m, inProgress: DispatchMachine.InProgress(ids: ["b1"], children: [DispatchMachine.childKey(rows[2])]))
                == .start([rows[1]]))
    }

    @Test func aSwitchedOffSinkWaitsAndItsSwitchIsReadAgainAfterAMinute() {
        var m = DispatchMachine(ordersByChild: false)
        _ = step(&m)
        #expect(
            m.looked(switchedOffRead: .some("HTTP 410"), at: clock, handedOver: nil, inProgress: none, now: now)
                == .switchedOff(reason: "HTTP 410"))
        #expect(
            m.step(now: now, clock: clock + .seconds(30), pausedUntil: nil, room: 4, inProgress: none)
                == .look(readSwitchedOff: false))
        #expect(
            m.looked(switchedOffRead: nil, at: clock + .seconds(30), handedOver: nil, inProgress: none, now: now)
                == .switchedOff(reason: "HTTP 410"))
        #expect(
            m.step(now: now, clock: clock + .seconds(61), pausedUntil: nil, room: 4, inProgress: none)
                == .look(readSwitchedOff: true))
        #expect(
            m.looked(switchedOffRead: .some(nil), at: clock + .seconds(61), handedOver: nil, inProgress: none, now: now)
                == .readLedger,
            "enabled again in another process")
    }

    @Test func nothingDueWaitsForTheNextDueTimeUnlessSendsRun() {
        var m = DispatchMachine(ordersByChild: false)
        _ = step(&m)
        _ = m.looked(switchedOffRead: .some(nil), at: clock, handedOver: nil, inProgress: none, now: now)
        let next = now.addingTimeInterval(42)
        m.read(due: [], folded: [], next: next)
        #expect(step(&m) == .wait(until: next))
        m.read(due: [], folded: [], next: next)
        #expect(
            step(&m, inProgress: DispatchMachine.InProgress(ids: ["x"], children: ["c1"])) == .wait(until: nil),
            "an outcome will signal")
    }
}
