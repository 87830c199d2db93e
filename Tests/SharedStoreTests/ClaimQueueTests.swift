import Foundation
import PostgresTransport
import SharedStore
import Synchronization
import TestSupport
import Testing

/// Jobs claimed by several replicas from one real PostgreSQL table.
@Suite(.timeLimit(.minutes(1))) struct ClaimQueueTests {
    static let schema = [
        PostgresMigration(
            1, "jobs", ClaimQueue.creating(table: "test_jobs", extraColumns: "sink text NOT NULL, body text"))
    ]

    func queue(_ cluster: PostgresCluster, database: String) throws -> ClaimQueue {
        let db = try PostgresConnection(PostgresLocation(cluster.url(database: database)), password: cluster.password)
        try PostgresMigrator.migrate(db, Self.schema)
        return ClaimQueue(table: "test_jobs", db: db)
    }

    @Test func threeReplicasClaimingAtOnceDoEachJobExactlyOnce() async throws {
        let cluster = try await PostgresCluster()
        let database = try await cluster.createDatabase()
        let setup = try queue(cluster, database: database)
        for i in 0..<300 { try setup.add(key: "job-\(i)", values: ["sink": "chat", "body": "transaction \(i)"]) }
        final class Tally: Sendable { let done = Mutex<[String: Int]>([:]) }
        let done = Tally()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for replica in ["a", "b", "c"] {
                let q = try queue(cluster, database: database)  // a session each, as separate relays have
                group.addTask {
                    while true {
                        let jobs = try q.claim(7, by: replica, for: .seconds(30))
                        if jobs.isEmpty { return }
                        for job in jobs {
                            done.done.withLock { $0[job.key, default: 0] += 1 }
                            #expect(try q.complete(job.key, by: replica))
                        }
                    }
                }
            }
            try await group.waitForAll()
        }
        let counts = done.done.withLock { $0 }
        #expect(counts.count == 300)
        #expect(counts.values.allSatisfy { $0 == 1 }, "a job done twice: \(counts.filter { $0.value > 1 })")
        #expect(try setup.counts()[.done] == 300)
    }

    @Test func aClaimNobodyFinishesIsTakenAgainWithTheSameKeyAndTheOldClaimerCannotFinishIt() async throws {
        let cluster = try await PostgresCluster()
        let q = try await queue(cluster, database: cluster.createDatabase())
        try q.add(key: "webhook-msg_1", values: ["sink": "chat", "body": "hello"])
        let first = try q.claim(10, by: "killed-replica", for: .milliseconds(300))
        #expect(first.map(\.key) == ["webhook-msg_1"])
        #expect(first.first?.attempts == 1)
        #expect(first.first?.values["body"] == "hello")
        #expect(try q.claim(10, by: "survivor", for: .seconds(30)).isEmpty, "claimed and not expired: nobody else's")
        try await Task.sleep(for: .milliseconds(400))
        let again = try q.claim(10, by: "survivor", for: .seconds(30))
        #expect(again.map(\.key) == ["webhook-msg_1"], "the same key, so the receiver sees the repeat")
        #expect(again.first?.attempts == 2)
        #expect(try q.complete("webhook-msg_1", by: "killed-replica") == false, "its claim is gone")
        #expect(try q.complete("webhook-msg_1", by: "survivor"))
        #expect(try q.counts() == [.pending: 0, .claimed: 0, .done: 1, .dead: 0])
    }

    @Test func aRetryComesDueLaterAndAGiveUpIsKept() async throws {
        let cluster = try await PostgresCluster()
        let q = try await queue(cluster, database: cluster.createDatabase())
        try q.add(key: "a", values: ["sink": "chat"])
        try q.add(key: "b", values: ["sink": "chat"])
        #expect(try q.add(key: "a", values: ["sink": "other"]) == false, "a key is added once")
        let jobs = try q.claim(10, by: "r", for: .seconds(30))
        #expect(jobs.map(\.key) == ["a", "b"])
        #expect(try q.retry("a", by: "r", after: .milliseconds(500), error: "HTTP 503"))
        #expect(try q.giveUp("b", by: "r", error: "HTTP 400"))
        #expect(try q.claim(10, by: "r", for: .seconds(30)).isEmpty, "not due yet")
        let next = try #require(try q.nextDue())
        #expect(next > .zero && next <= .milliseconds(500))
        try await Task.sleep(for: next + .milliseconds(50))
        let retried = try q.claim(10, by: "r", for: .seconds(30))
        #expect(retried.map(\.key) == ["a"])
        #expect(retried.first?.attempts == 2)
        #expect(try q.counts()[.dead] == 1)
    }

    @Test func addingAJobWakesAWaitingReplica() async throws {
        let cluster = try await PostgresCluster()
        let database = try await cluster.createDatabase()
        let q = try queue(cluster, database: database)
        let listener = try PostgresConnection(
            PostgresLocation(cluster.url(database: database)), password: cluster.password)
        try listener.listen("test_jobs")
        let woken = Task.detached { try listener.notifications(timeout: .seconds(10)) }
        try await Task.sleep(for: .milliseconds(100))
        let added = ContinuousClock.now
        try q.add(key: "x", values: ["sink": "chat"])
        let notes = try await woken.value
        #expect(notes.map(\.channel) == ["test_jobs"])
        #expect(ContinuousClock.now - added < .seconds(2), "woken by the notification, not by a timeout")
    }
}

@Suite(.timeLimit(.minutes(1))) struct MigratorAndRegistryTests {
    @Test func replicasStartingTogetherApplyEachMigrationOnce() async throws {
        let cluster = try await PostgresCluster()
        let location = try PostgresLocation(cluster.url(database: try await cluster.createDatabase()))
        let migrations = [
            ReplicaRegistry.migration,
            PostgresMigration(2, "counter", "CREATE TABLE counter (n integer); INSERT INTO counter VALUES (0)"),
            PostgresMigration(3, "bump", "UPDATE counter SET n = n + 1"),
        ]
        let applied = try await withThrowingTaskGroup(of: [Int].self) { group in
            for _ in 0..<3 {
                group.addTask {
                    let db = try PostgresConnection(location, password: cluster.password)
                    return try PostgresMigrator.migrate(db, migrations)
                }
            }
            return try await group.reduce(into: [Int]()) { $0 += $1 }
        }
        #expect(applied.sorted() == [1, 2, 3], "each step by one replica")
        let db = try PostgresConnection(location, password: cluster.password)
        #expect(try db.query("SELECT n FROM counter").scalar == "1")
        #expect(try PostgresMigrator.applied(db) == [1, 2, 3])
    }

    @Test func theRegistryShowsWhoHoldsTheLinkAndWhoIsGone() async throws {
        let cluster = try await PostgresCluster()
        let database = try await cluster.createDatabase()
        let db = try PostgresConnection(PostgresLocation(cluster.url(database: database)), password: cluster.password)
        try PostgresMigrator.migrate(db, [ReplicaRegistry.migration])
        let registry = ReplicaRegistry(db, staleAfter: .milliseconds(600))
        try registry.register("relay-a", host: "box1", pid: 101)
        try registry.register("relay-b", host: "box2", pid: 202)
        try registry.heartbeat("relay-b", holdsLink: true)
        var replicas = try registry.replicas()
        #expect(replicas.map(\.name) == ["relay-b", "relay-a"], "the holder first")
        #expect(replicas.map(\.holdsLink) == [true, false])
        #expect(replicas.allSatisfy { $0.alive })
        let since = try #require(replicas.first?.linkHeldSince)
        try await Task.sleep(for: .milliseconds(1100))
        try registry.heartbeat("relay-b", holdsLink: true)
        replicas = try registry.replicas()
        #expect(replicas.first?.linkHeldSince == since, "held since the first time, not the last heartbeat")
        #expect(replicas.map(\.alive) == [true, false], "relay-a sent no heartbeat: gone")
        try registry.heartbeat("relay-b", holdsLink: false)
        #expect(try registry.replicas().allSatisfy { !$0.holdsLink })
    }
}
