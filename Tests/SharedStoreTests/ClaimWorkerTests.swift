import Foundation
import PostgresTransport
import SharedStore
import Synchronization
import TestSupport
import Testing

/// Workers of several replicas on one queue of a real PostgreSQL server.
@Suite(.timeLimit(.minutes(1))) struct ClaimWorkerTests {
    final class Seen: Sendable {
        let keys = Mutex<[String: [String]]>([:])  // key -> the replicas that handled it, in order
        func handled(_ key: String, by replica: String) { keys.withLock { $0[key, default: []].append(replica) } }
    }

    /// Runs `worker`, recording each job it takes; `hangs`: the first job's send lasts until the worker is stopped.
    func start(_ worker: ClaimWorker, _ seen: Seen, hangs: Bool = false) -> Task<Void, any Error> {
        Task {
            try await worker.run { job in
                seen.handled(job.key, by: worker.replica)
                while hangs && !Task.isCancelled { try? await Task.sleep(for: .milliseconds(10)) }
                return .done
            }
        }
    }

    func worker(_ cluster: PostgresCluster, _ database: String, _ replica: String, claimFor: Duration = .seconds(60)) throws -> ClaimWorker {
        let location = try PostgresLocation(cluster.url(database: database))
        let db = try PostgresConnection(location, password: cluster.password)
        try PostgresMigrator.migrate(db, ClaimQueueTests.schema)
        var worker = try ClaimWorker(
            queue: ClaimQueue(table: "test_jobs", db: db), listener: PostgresConnection(location, password: cluster.password), replica: replica)
        worker.claimFor = claimFor
        worker.maxWait = .milliseconds(200)
        return worker
    }

    @Test func twoReplicasShareTheJobsAndAJobAddedLaterIsTakenAtOnce() async throws {
        let cluster = try PostgresCluster()
        let database = try cluster.createDatabase()
        let a = try worker(cluster, database, "a")
        let b = try worker(cluster, database, "b")
        for i in 0..<200 { try a.queue.add(key: "msg_\(i)", values: ["sink": "chat"]) }
        let seen = Seen()
        let running = [a, b].map { start($0, seen) }
        defer { running.forEach { $0.cancel() } }
        #expect(await eventually(.seconds(20)) { seen.keys.withLock { $0.count } == 200 })
        let late = ContinuousClock.now
        try a.queue.add(key: "late", values: ["sink": "chat"])
        #expect(await eventually(.seconds(5)) { seen.keys.withLock { $0["late"] != nil } })
        #expect(ContinuousClock.now - late < .seconds(2), "woken by the notification")
        let keys = seen.keys.withLock { $0 }
        #expect(keys.values.allSatisfy { $0.count == 1 }, "each job once")
        #expect(Set(keys.values.flatMap { $0 }) == ["a", "b"], "both replicas worked")
        #expect(await eventually(.seconds(5)) { (try? a.queue.counts()[.done]) == 201 })
    }

    @Test func theClaimsOfAReplicaThatDiedAreTakenAgainWithTheSameKeysAndOnlyThoseRepeat() async throws {
        let cluster = try PostgresCluster()
        let database = try cluster.createDatabase()
        let doomed = try worker(cluster, database, "doomed", claimFor: .seconds(1))
        let survivor = try worker(cluster, database, "survivor")
        for i in 0..<40 { try doomed.queue.add(key: "msg_\(i)", values: ["sink": "chat"]) }
        let seen = Seen()
        // The doomed replica takes a batch, starts sending, and never finishes: its sessions end as a killed
        // process's would.
        let dying = start(doomed, seen, hangs: true)
        #expect(await eventually(.seconds(10)) { seen.keys.withLock { !$0.isEmpty } })
        doomed.queue.db.close()  // its sessions end first, as a killed process's do: it can record nothing more
        doomed.listener.close()
        dying.cancel()
        let running = start(survivor, seen)
        defer { running.cancel() }
        #expect(await eventually(.seconds(20)) { seen.keys.withLock { $0.count == 40 && $0.values.allSatisfy { $0.last == "survivor" } } })
        let keys = seen.keys.withLock { $0 }
        let repeated = keys.filter { $0.value.count > 1 }
        #expect(!repeated.isEmpty && repeated.count <= 1, "the one job the dead replica had started, and only it: \(repeated)")
        #expect(repeated.values.allSatisfy { $0 == ["doomed", "survivor"] })
        #expect(await eventually(.seconds(5)) { (try? survivor.queue.counts()[.done]) == 40 })
    }

    @Test func aReplicaThatStopsFinishesTheJobInHandAndGivesTheRestBackAtOnce() async throws {
        let cluster = try PostgresCluster()
        let database = try cluster.createDatabase()
        let stopping = try worker(cluster, database, "stopping")  // claims for 60 s: the rest must not wait for that
        let other = try worker(cluster, database, "other")
        for i in 0..<10 { try stopping.queue.add(key: "msg_\(i)", values: ["sink": "chat"]) }
        let seen = Seen()
        let first = start(stopping, seen, hangs: true)  // the send in flight ends well at the stop
        #expect(await eventually(.seconds(10)) { seen.keys.withLock { $0.count == 1 } })
        first.cancel()
        try await first.value
        let running = start(other, seen)
        defer { running.cancel() }
        let handedOver = ContinuousClock.now
        #expect(await eventually(.seconds(10)) { seen.keys.withLock { $0.count == 10 } })
        #expect(ContinuousClock.now - handedOver < .seconds(5), "not after the 60 s claim")
        #expect(seen.keys.withLock { $0.values.allSatisfy { $0.count == 1 } }, "nothing twice")
        #expect(await eventually(.seconds(5)) { (try? other.queue.counts()[.done]) == 10 })
    }
}
