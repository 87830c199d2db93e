import Foundation
import Store
import StoreContract
import Synchronization
import Testing

/// `holdingLease` asks a held lease whether it is still held only when it can be lost: an idle relay on a SQLite
/// file does not wake every second for a lock it keeps until it lets go.
@Suite struct HoldingLeaseTests {
    /// A lease granted once, whose loss the test decides; it counts how often it is asked.
    final class ScriptedLease: Lease {
        let canBeLostWhileHeld: Bool
        let asked = Atomic(0)
        let held = Atomic(false)
        let grants = Atomic(1)

        init(canBeLost: Bool) { canBeLostWhileHeld = canBeLost }

        func tryAcquire() throws -> Bool {
            if held.load(ordering: .relaxed) { return true }
            guard grants.wrappingSubtract(1, ordering: .relaxed).oldValue > 0 else { return false }
            held.store(true, ordering: .relaxed)
            return true
        }

        var isHeld: Bool {
            asked.wrappingAdd(1, ordering: .relaxed)
            return held.load(ordering: .relaxed)
        }

        func release() { held.store(false, ordering: .relaxed) }
    }

    /// The work's life as the test sees it.
    final class Work: Sendable {
        let started = Atomic(false)
        let cancelled = Atomic(false)

        func run() async throws {
            started.store(true, ordering: .relaxed)
            do { try await Task.sleep(for: .seconds(60)) } catch {
                cancelled.store(true, ordering: .relaxed)
                throw error
            }
        }
    }

    func until(_ what: String, _ check: () -> Bool) async throws {
        let deadline = ContinuousClock.now + .seconds(10)
        while !check() {
            guard ContinuousClock.now < deadline else {
                Issue.record("timed out waiting until \(what)")
                return
            }
            try await Task.sleep(for: .milliseconds(5))
        }
    }

    @Test func aLeaseThatCannotBeLostIsNotAskedWhileHeld() async throws {
        let lease = ScriptedLease(canBeLost: false)
        let work = Work()
        let holder = Task { try await holdingLease(lease, interval: .milliseconds(10)) { try await work.run() } }
        try await until("the work started") { work.started.load(ordering: .relaxed) }
        // Thirty intervals: a lease checked every interval would have been asked about thirty times by now.
        try await Task.sleep(for: .milliseconds(300))
        let asked = lease.asked.load(ordering: .relaxed)
        #expect(asked == 0)
        holder.cancel()
        _ = await holder.result
        let (cancelled, held) = (work.cancelled.load(ordering: .relaxed), lease.held.load(ordering: .relaxed))
        #expect(cancelled && !held)
    }

    @Test func aLeaseThatCanBeLostIsCheckedAndItsLossEndsTheWork() async throws {
        let lease = ScriptedLease(canBeLost: true)
        let work = Work()
        let holder = Task { try await holdingLease(lease, interval: .milliseconds(10)) { try await work.run() } }
        try await until("the work started") { work.started.load(ordering: .relaxed) }
        try await until("the lease was asked") { lease.asked.load(ordering: .relaxed) > 0 }
        let cancelledEarly = work.cancelled.load(ordering: .relaxed)
        #expect(!cancelledEarly)
        lease.held.store(false, ordering: .relaxed)  // the session was cut
        try await until("the work was cancelled") { work.cancelled.load(ordering: .relaxed) }
        holder.cancel()
        _ = await holder.result
    }

    @Test func theFileLeaseSaysItCannotBeLostWhileHeld() throws {
        let file = FileManager.default.temporaryDirectory.appending(path: "lease-\(UUID()).sqlite").path
        defer { try? FileManager.default.removeItem(atPath: file + ".lock") }
        let lease = FileLease(database: file)
        #expect(try lease.tryAcquire() && lease.isHeld && !lease.canBeLostWhileHeld)
        lease.release()
        #expect(!lease.isHeld)
    }
}
