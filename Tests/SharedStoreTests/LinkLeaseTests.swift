import Core
import Foundation
import PostgresTransport
import SharedStore
import StoreContract
import Synchronization
import TestSupport
import Testing

/// The hub link's lease on a real PostgreSQL server: one holder at a time, taken over when the holder goes.
@Suite(.timeLimit(.minutes(1))) struct LinkLeaseTests {
    @Test func oneReplicaHoldsItAndAnotherTakesItOnceReleased() async throws {
        let cluster = try await PostgresCluster()
        let location = try PostgresLocation(cluster.url())
        let a = LinkLease("https://family.example/hubs/family", location: location, password: cluster.password)
        let b = LinkLease("https://family.example/hubs/family", location: location, password: cluster.password)
        let otherFamily = LinkLease("https://other.example/hubs/family", location: location, password: cluster.password)
        #expect(try a.tryAcquire())
        #expect(try a.tryAcquire(), "asking again while holding it keeps it")
        #expect(try b.tryAcquire() == false)
        #expect(try otherFamily.tryAcquire(), "another hub's lease is another lock")
        #expect(a.isHeld && !b.isHeld)
        a.release()
        #expect(!a.isHeld)
        #expect(try b.tryAcquire())
        #expect(try a.tryAcquire() == false)
    }

    @Test func aHolderKilledWithSignal9IsTakenOverWithinFiveSeconds() async throws {
        let cluster = try await PostgresCluster()
        let lease = LinkLease("hub", location: try PostgresLocation(cluster.url()), password: cluster.password)
        // Another process holds the same lock on an idle session, as a relay replica does, and is killed outright: psql reading its commands from a pipe the test keeps open.
        let fifo = cluster.dir.appending(path: "holder.sql").path
        #expect(mkfifo(fifo, 0o644) == 0)
        if getuid() == 0 { _ = try await runCommand(["chown", "postgres", fifo]) }
        let commands = open(fifo, O_RDWR)  // read-write: opening it neither blocks nor lets psql see an end
        defer { close(commands) }
        let holder = try spawnServer(
            try cluster.psqlCommand(["-f", fifo]), output: cluster.dir.appending(path: "holder.log").path)
        defer { stopServer(holder, signal: SIGKILL) }
        let sql = "SELECT pg_advisory_lock(\(lease.key));\n"
        #expect(write(commands, sql, sql.utf8.count) == sql.utf8.count)
        let holding = ContinuousClock.now + .seconds(20)
        while try await cluster.psql("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted") != "1\n" {
            #expect(ContinuousClock.now < holding, "the holder never took the lock")
            try await Task.sleep(for: .milliseconds(20))
        }
        #expect(try lease.tryAcquire() == false, "held by the other process")
        // As a standby replica waits: in the server's queue for the lock.
        let wake = PollWake()
        let standby = Task {
            try await offThread(named: "test-standby") {
                (held: try lease.acquire(until: wake), at: ContinuousClock.now)
            }
        }
        #expect(await eventually(.seconds(10)) { (try? await advisoryLocks(cluster)) ?? (0, 0) == (1, 1) }, "queued")
        let killed = ContinuousClock.now  // before the kill: the grant may come before this thread runs again
        kill(holder, SIGKILL)
        let giveUp = Task {
            try await Task.sleep(for: .seconds(5))
            wake.signal()
        }
        defer { giveUp.cancel() }
        let granted = try await standby.value
        try #require(granted.held, "not taken over within 5 s")
        let took = granted.at - killed
        let takeover = took.components
        print("lease test: taken over \(took) after the holder's kill -9")
        ReliabilityFigures.record(
            "the hub link's lease: its holder killed (kill -9), taken over",
            [
                ("kills", 1),
                ("takeover_ms", Int(takeover.seconds * 1000 + takeover.attoseconds / 1_000_000_000_000_000)),
            ])
        #expect(lease.isHeld)
    }

    @Test func aServerRestartEndsTheLeaseAndItIsTakenAgain() async throws {
        let cluster = try await PostgresCluster()
        let lease = LinkLease("hub", location: try PostgresLocation(cluster.url()), password: cluster.password)
        #expect(try lease.tryAcquire())
        cluster.stop()
        #expect(!lease.isHeld, "a lost session holds nothing")
        #expect(throws: PostgresError.self) { try lease.tryAcquire() }
        try await cluster.start()
        #expect(try lease.tryAcquire())
    }

    /// The advisory locks the server holds and queues, from `pg_locks`: (granted, waiting).
    private func advisoryLocks(_ cluster: PostgresCluster) async throws -> (granted: Int, waiting: Int) {
        let counts = try await cluster.psql(
            "SELECT count(*) FILTER (WHERE granted) || ' ' || count(*) FILTER (WHERE NOT granted) FROM pg_locks WHERE locktype = 'advisory'"
        ).split(separator: " ").map { Int($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
        return (counts.first.flatMap { $0 } ?? -1, counts.last.flatMap { $0 } ?? -1)
    }

    /// `a` holds the lease and `b` waits in the server's queue for it until `wake`, as a standby replica does.
    private func heldAndQueued(
        _ cluster: PostgresCluster, until wake: PollWake = PollWake()
    ) async throws -> (a: LinkLease, b: LinkLease, granted: Task<Bool, any Error>) {
        let location = try PostgresLocation(cluster.url())
        let a = LinkLease("hub", location: location, password: cluster.password)
        let b = LinkLease("hub", location: location, password: cluster.password)
        #expect(try a.tryAcquire())
        let granted = Task { try await offThread(named: "test-standby") { try b.acquire(until: wake) } }
        #expect(await eventually(.seconds(10)) { (try? await advisoryLocks(cluster)) ?? (0, 0) == (1, 1) }, "queued")
        return (a, b, granted)
    }

    @Test func aStandbyWaitsInTheServersQueueAndIsGrantedTheLeaseWhenItsHolderLetsGo() async throws {
        let cluster = try await PostgresCluster()
        let (a, b, granted) = try await heldAndQueued(cluster)
        a.release()
        #expect(try await granted.value, "granted once the holder let go")
        #expect(try await advisoryLocks(cluster) == (1, 0))
        #expect(b.isHeld)
    }

    /// A server or role whose statements time out (`statement_timeout`, `lock_timeout`) does not end a standby's
    /// wait: its session sets both to none.
    @Test func aStandbysWaitOutlastsTheServersStatementTimeouts() async throws {
        let cluster = try await PostgresCluster()
        _ = try await cluster.psql("ALTER DATABASE postgres SET statement_timeout = '300ms'")
        _ = try await cluster.psql("ALTER DATABASE postgres SET lock_timeout = '300ms'")
        let (a, _, granted) = try await heldAndQueued(cluster)
        try await Task.sleep(for: .seconds(1))  // past both timeouts
        #expect(try await advisoryLocks(cluster) == (1, 1), "still queued")
        a.release()
        #expect(try await granted.value)
    }

    @Test func aWaitingStandbyStopsAtItsWakeAndLeavesNothingQueued() async throws {
        let cluster = try await PostgresCluster()
        let wake = PollWake()
        let (a, b, granted) = try await heldAndQueued(cluster, until: wake)
        wake.signal()
        #expect(try await granted.value == false)
        #expect(try await advisoryLocks(cluster) == (1, 0), "the wait was cancelled in the server")
        #expect(try b.tryAcquire() == false, "its session still answers")
        a.release()
        #expect(try b.tryAcquire())
    }

    @Test func aHolderAsksTheServerNothingWhileItHoldsAndSeesItsSessionEnd() async throws {
        let cluster = try await PostgresCluster()
        let lease = LinkLease("hub", location: try PostgresLocation(cluster.url()), password: cluster.password)
        let runs = Mutex(0)
        let holder = Task {
            try? await holdingLease(lease, interval: .milliseconds(200)) {
                runs.withLock { $0 += 1 }
                while !Task.isCancelled { try? await Task.sleep(for: .milliseconds(20)) }
            }
        }
        defer { holder.cancel() }
        #expect(await eventually(.seconds(10)) { runs.withLock { $0 } == 1 })
        // The server's own record of the session's last statement: unchanged while the holder rests.
        let lastStatement =
            "SELECT query_start FROM pg_stat_activity WHERE application_name = 'allowance-relay link lease'"
        let before = try await cluster.psql(lastStatement)
        try await Task.sleep(for: .seconds(3))  // the window in which nothing may be asked
        #expect(try await cluster.psql(lastStatement) == before, "asked the server while holding")
        _ = try await cluster.psql(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'allowance-relay link lease'"
        )
        #expect(await eventually(.seconds(10)) { runs.withLock { $0 } == 2 }, "the work ended and ran again")
    }

    @Test func theWorkRunsOnOneReplicaAtATimeAndMovesWhenItsHolderStops() async throws {
        let cluster = try await PostgresCluster()
        let location = try PostgresLocation(cluster.url())
        final class Running: Sendable {
            let state = Mutex<(now: Set<String>, most: Int, ran: [String])>(([], 0, []))
        }
        let running = Running()
        func replica(_ name: String) -> Task<Void, Never> {
            let lease = LinkLease("hub", location: location, password: cluster.password)
            return Task {
                try? await holdingLease(lease, interval: .milliseconds(200)) {
                    running.state.withLock { r in
                        r.now.insert(name)
                        r.most = max(r.most, r.now.count)
                        r.ran.append(name)
                    }
                    while !Task.isCancelled { try? await Task.sleep(for: .milliseconds(20)) }
                    running.state.withLock { _ = $0.now.remove(name) }
                }
            }
        }
        let replicas = ["a", "b", "c"].map { ($0, replica($0)) }
        defer { replicas.forEach { $0.1.cancel() } }
        #expect(await eventually(.seconds(10)) { running.state.withLock { $0.now.count } == 1 })
        let first = try #require(running.state.withLock { $0.now.first })
        replicas.first { $0.0 == first }?.1.cancel()
        #expect(
            await eventually(.seconds(5)) { running.state.withLock { $0.now.count == 1 && !$0.now.contains(first) } },
            "taken over")
        #expect(running.state.withLock { $0.most } == 1, "never two at once")
        #expect(running.state.withLock { $0.ran.count } == 2)
    }
}
