import Alerts
import AllowanceAPI
import Core
import Foundation
import PostgresTransport
import SharedStore
import Store
import StoreContract
import TestSupport
import Testing

/// The relay's store on a real PostgreSQL server, as replicas use it: events stored once with their deliveries,
/// claims that never overlap, expire to another replica under the same id, and outcomes only from the holder.
@Suite(.timeLimit(.minutes(1))) struct SharedRelayStoreTests {
    /// One delivery per event to the sink `hook`; digests when asked.
    struct EveryEvent: AlertPlanner {
        var digest = false
        func plan(_ event: RelayEvent) -> [PlannedDelivery] {
            [PlannedDelivery(sink: "hook", rule: "all", kind: event.kind, urgency: .normal, digest: digest)]
        }
    }

    let child = Child(id: UUID(), firstName: "Alice", lastName: "A", weeklyAllowance: 5, currentBalance: 10)

    func open(
        _ cluster: PostgresCluster, _ database: String, _ replica: String, digest: Bool = false
    ) throws -> SharedRelayStore {
        let store = try SharedRelayStore.open(
            try PostgresLocation(cluster.url(database: database)), password: cluster.password, replica: replica)
        store.setPlanner(EveryEvent(digest: digest))
        return store
    }

    func transaction(_ n: Int, balanceBefore: Int64) -> Transaction {
        Transaction(
            id: UUID(), childId: child.id, amount: 1, type: .credit, description: "t\(n)",
            balanceAfter: Money.decimal(cents: balanceBefore + 100),
            createdAt: Date().addingTimeInterval(Double(n) - 100), createdByName: "Parent")
    }

    @Test func anEventIsStoredOnceWithItsDeliveryAndAnUnknownChildAsksForACatchUp() async throws {
        let cluster = try await PostgresCluster()
        let store = try await open(cluster, try cluster.createDatabase(), "a")
        let t = transaction(1, balanceBefore: 1000)
        #expect(
            try store.apply([.transactionCreated(t)]) == [
                .needsCatchUp(reason: "transaction \(t.id) is for child \(child.id), who is not in the cache yet")
            ])
        try store.storeCaughtUp(children: [child], transactions: [])
        #expect(try store.apply([.transactionCreated(t)]) == [.stored(gap: nil)])
        #expect(try store.apply([.transactionCreated(t)]) == [.duplicate])
        #expect(try store.deliveryCounts() == ["hook": ["pending": 1]])
        #expect(try store.transactions().map(\.id) == [t.id])
        #expect(try store.currentBalance(child: child.id) == 11)
        // A balance that does not follow from the cached one is a gap: the caller catches up.
        #expect(try store.apply([.transactionCreated(transaction(2, balanceBefore: 5000))]) == [.stored(gap: child.id)])
    }

    /// A replica is shown up while its listener's session holds its presence lock. A lock still held by a session
    /// the server has not seen end (the one a reconnecting listener replaces) is taken as soon as it is free.
    @Test func theListenerHoldsTheReplicasPresenceAndTakesItOnceAnEarlierSessionLetsGo() async throws {
        let cluster = try await PostgresCluster()
        let database = try await cluster.createDatabase()
        let store = try open(cluster, database, "a")
        try store.register(host: "h")
        let location = try PostgresLocation(cluster.url(database: database))
        let earlier = try PostgresConnection(location, password: cluster.password)
        try earlier.query("SELECT pg_advisory_lock($1)", [String(ReplicaRegistry.presenceKey("a"))])
        let (running, wake) = (StopFlag(), PollWake())
        let listening = Task {
            await offThread(named: "test-listen") {
                store.listen(while: { !running.isSet }, wake: wake, heard: { _ in }, failed: { _ in })
            }
        }
        defer {
            running.set()
            wake.signal()
        }
        let listenersLock = """
            SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a USING (pid)
            WHERE l.locktype = 'advisory' AND l.granted AND a.application_name = 'allowance-relay a listener'
            """
        #expect(
            await eventually(.seconds(10)) {
                (try? await cluster.psql(
                    "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'allowance-relay a listener'",
                    database: database)) == "1\n"
            }, "listening")
        #expect(try await cluster.psql(listenersLock, database: database) == "0\n", "still the earlier session's")
        #expect(try store.replicas().first?.alive == true, "up by the earlier session's lock")
        earlier.close()
        #expect(
            await eventually(.seconds(10)) { (try? await cluster.psql(listenersLock, database: database)) == "1\n" },
            "the listener took it")
        #expect(try store.replicas().first?.alive == true)
        running.set()
        wake.signal()
        await listening.value
        #expect(
            await eventually(.seconds(10)) { (try? store.replicas().first?.alive) == false }, "its session ended: gone")
    }

    @Test func twoReplicasNeverClaimTheSameDelivery() async throws {
        let cluster = try await PostgresCluster()
        let database = try await cluster.createDatabase()
        let (a, b) = (try open(cluster, database, "a"), try open(cluster, database, "b"))
        try a.storeCaughtUp(children: [child], transactions: [])
        _ = try a.apply((0..<20).map { .transactionCreated(transaction($0, balanceBefore: 1000 + Int64($0) * 100)) })
        // Both claim at the same moment, each on its own thread.
        let claims: [@Sendable () throws -> [Delivery]] = [
            { try a.dueDeliveries(sink: "hook", at: Date(), limit: 12, excluding: []) },
            { try b.dueDeliveries(sink: "hook", at: Date(), limit: 20, excluding: []) },
        ]
        let taken = try atOnce(claims)
        let (takenByA, takenByB) = (taken[0], taken[1])
        #expect(takenByA.count + takenByB.count == 20 && takenByA.count <= 12)
        #expect(Set(takenByA.map(\.id)).isDisjoint(with: takenByB.map(\.id)))
        #expect(try a.dueDeliveries(sink: "hook", at: Date(), limit: 20, excluding: []).isEmpty, "all claimed")
        #expect(try a.deliveryCounts() == ["hook": ["in_flight": 20]])
    }

    @Test func anExpiredClaimGoesToAnotherReplicaUnderTheSameIdAndOnlyItsOutcomeCounts() async throws {
        let cluster = try await PostgresCluster()
        let database = try await cluster.createDatabase()
        let (a, b) = (try open(cluster, database, "a"), try open(cluster, database, "b"))
        try a.storeCaughtUp(children: [child], transactions: [])
        _ = try a.apply([.transactionCreated(transaction(1, balanceBefore: 1000))])
        let first = try a.dueDeliveries(sink: "hook", at: Date(), limit: 10, excluding: [])
        #expect(first.count == 1)
        #expect(try b.dueDeliveries(sink: "hook", at: Date(), limit: 10, excluding: []).isEmpty, "held by a")
        #expect(try a.renewClaims() == 1)
        // a stops renewing (killed): its claim runs out.
        try await cluster.psql(
            "UPDATE relay_delivery SET claim_expires_at = now() - interval '1 second'", database: database)
        #expect(try b.nextDeliveryDue(sink: "hook", excluding: []) != nil, "b knows when to look again")
        let again = try b.dueDeliveries(sink: "hook", at: Date(), limit: 10, excluding: [])
        #expect(again.map(\.id) == first.map(\.id), "the same id: the receiver's webhook-id")
        try a.record([(first[0].id, .done(at: Date()))])  // too late: b holds it
        #expect(try a.deliveryCounts() == ["hook": ["in_flight": 1]])
        try b.record([(again[0].id, .retry(error: "HTTP 503", at: Date()))])
        #expect(try b.deliveries().first?.state == .pending)
        #expect(try b.deliveries().first?.lastError == "HTTP 503")
        let third = try a.dueDeliveries(sink: "hook", at: Date(), limit: 10, excluding: [])
        try a.record([(third[0].id, .done(at: Date()))])
        #expect(try a.deliveries().first?.state == .delivered)
        #expect(try a.deliveries().first?.attempts == 2)
    }

    @Test func aGracefulStopGivesItsClaimsBackAtOnce() async throws {
        let cluster = try await PostgresCluster()
        let database = try await cluster.createDatabase()
        let (a, b) = (try open(cluster, database, "a"), try open(cluster, database, "b"))
        try a.storeCaughtUp(children: [child], transactions: [])
        _ = try a.apply([
            .transactionCreated(transaction(1, balanceBefore: 1000)),
            .transactionCreated(transaction(2, balanceBefore: 1100)),
        ])
        #expect(try a.dueDeliveries(sink: "hook", at: Date(), limit: 10, excluding: []).count == 2)
        #expect(try a.releaseClaims() == 2)
        #expect(try b.dueDeliveries(sink: "hook", at: Date(), limit: 10, excluding: []).count == 2)
    }

    @Test func aDigestClaimsWhatItFoldsSoNoOtherReplicaSendsAPart() async throws {
        let cluster = try await PostgresCluster()
        let database = try await cluster.createDatabase()
        let (a, b) = (try open(cluster, database, "a", digest: true), try open(cluster, database, "b", digest: true))
        try a.storeCaughtUp(children: [child], transactions: [])
        _ = try a.apply((0..<3).map { .transactionCreated(transaction($0, balanceBefore: 1000 + Int64($0) * 100)) })
        let parts = try a.foldableDeliveries(sink: "hook", child: child.id, dueBy: Date().addingTimeInterval(5))
        #expect(parts.count == 3)
        #expect(try b.foldableDeliveries(sink: "hook", child: child.id, dueBy: Date().addingTimeInterval(5)).isEmpty)
        #expect(try b.dueDeliveries(sink: "hook", at: Date(), limit: 10, excluding: []).isEmpty)
        let digest = try a.foldIntoDigest(
            parts, digest: RelayEvent(kind: .digest, at: Date(), childId: child.id), currency: "USD", at: Date())
        try a.record([(digest.id, .done(at: Date()))])
        #expect(try a.deliveryCounts() == ["hook": ["merged": 3, "delivered": 1]])
    }
    @Test func theSharedOutboxHandsOutEachChildsOldestWriteOnlyAndAnExpiredClaimKeepsItsKey() async throws {
        let cluster = try await PostgresCluster()
        let database = try await cluster.createDatabase()
        let (a, b) = (try open(cluster, database, "a"), try open(cluster, database, "b"))
        let bob = Child(id: UUID(), firstName: "Bob", lastName: "B", weeklyAllowance: 5, currentBalance: 1)
        try a.storeCaughtUp(children: [child, bob], transactions: [])
        let first = try a.enqueueTransaction(child: child.id, amount: 2, type: .credit, description: "one")
        _ = try a.enqueueTransaction(child: child.id, amount: 3, type: .credit, description: "two")
        _ = try a.enqueueTransaction(child: bob.id, amount: 1, type: .debit, description: "bob's")
        #expect(throws: StoreError.self) {
            try a.enqueueTransaction(child: bob.id, amount: 0.01, type: .debit, description: "too much")
        }
        let takenByA = try a.dueOutbox(at: Date())
        #expect(takenByA.map(\.description) == ["one", "bob's"], "one write per child: the oldest")
        #expect(try b.dueOutbox(at: Date()).isEmpty, "Alice's second waits for her first")
        try a.outboxSent(takenByA[1].seq, server: transaction(9, balanceBefore: 100), at: Date())
        // a dies holding Alice's first write: b takes it when the claim runs out, with the same key.
        try await cluster.psql(
            "UPDATE relay_outbox SET claim_expires_at = now() - interval '1 second' WHERE state = 'in_flight'",
            database: database)
        let again = try b.dueOutbox(at: Date())
        #expect(again.map(\.idempotencyKey) == [first.idempotencyKey])
        try a.outboxSent(first.seq, server: transaction(10, balanceBefore: 100), at: Date())  // too late: b holds it
        #expect(try b.dueOutbox(at: Date()).isEmpty)
        try b.outboxRetry(first.seq, error: "HTTP 503", retryAt: Date().addingTimeInterval(60))
        #expect(try b.dueOutbox(at: Date()).isEmpty, "the retry holds back the write after it")
        #expect(try b.nextOutboxAttempt(after: Date()) != nil)
        #expect(try b.outboxDueNow(at: Date()) == 1)
        let due = try b.dueOutbox(at: Date())
        try b.outboxSent(due[0].seq, server: transaction(11, balanceBefore: 100), at: Date())
        #expect(try b.dueOutbox(at: Date()).map(\.description) == ["two"])
        #expect(try a.outbox().map(\.state) == [.sent, .inFlight, .sent])
    }

    /// A 429 one replica met holds for the others: nothing of the sink is handed out to any replica before the time
    /// the destination gave, and their workers are told to sleep until then.
    @Test func aPauseOneReplicaLearntHoldsForEveryReplica() async throws {
        let cluster = try await PostgresCluster()
        let database = try await cluster.createDatabase()
        let (a, b) = (try open(cluster, database, "a"), try open(cluster, database, "b"))
        try a.storeCaughtUp(children: [child], transactions: [])
        _ = try a.apply((0..<3).map { .transactionCreated(transaction($0, balanceBefore: 1000 + Int64($0) * 100)) })
        let now = Date()
        try a.pauseSink("hook", until: now.addingTimeInterval(30))
        #expect(try b.dueDeliveries(sink: "hook", at: now, limit: 10, excluding: []).isEmpty, "paused for b too")
        let next = try #require(try b.nextDeliveryDue(sink: "hook", excluding: []))
        #expect(next >= now.addingTimeInterval(29.9), "b sleeps until the pause ends")
        #expect(try b.dueDeliveries(sink: "hook", at: now.addingTimeInterval(31), limit: 10, excluding: []).count == 3)
        // A shorter pause learnt later does not shorten the one in force.
        try b.pauseSink("hook", until: now.addingTimeInterval(60))
        try a.pauseSink("hook", until: now.addingTimeInterval(5))
        #expect(try a.nextDeliveryDue(sink: "hook", excluding: []) ?? now >= now.addingTimeInterval(59.9))
        try a.enableSink("hook", at: now)
        #expect(try a.disabledSinks().isEmpty)
    }

    /// A chat keeps each child's alerts in order across replicas: claiming at the same moment, the two replicas get
    /// one delivery per child between them, and a child's next only once its first is settled.
    @Test func aChatsChildGetsOneSendAtATimeAcrossReplicas() async throws {
        let cluster = try await PostgresCluster()
        let database = try await cluster.createDatabase()
        let (a, b) = (try open(cluster, database, "a"), try open(cluster, database, "b"))
        for store in [a, b] { store.setOrderedSinks(["hook"]) }
        let bob = Child(id: UUID(), firstName: "Bob", lastName: "B", weeklyAllowance: 5, currentBalance: 1)
        try a.storeCaughtUp(children: [child, bob], transactions: [])
        _ = try a.apply((0..<3).map { .transactionCreated(transaction($0, balanceBefore: 1000 + Int64($0) * 100)) })
        var bobs = transaction(9, balanceBefore: 100)
        bobs.childId = bob.id
        _ = try a.apply([.transactionCreated(bobs)])
        let claims: [@Sendable () throws -> [Delivery]] = [
            { try a.dueDeliveries(sink: "hook", at: Date(), limit: 10, excluding: []) },
            { try b.dueDeliveries(sink: "hook", at: Date(), limit: 10, excluding: []) },
        ]
        let byReplica = try atOnce(claims)
        let taken = byReplica.flatMap { $0 }
        #expect(taken.count == 2 && Set(taken.compactMap(\.childId)) == [child.id, bob.id], "\(taken.map(\.childId))")
        let alices = try #require(taken.first { $0.childId == child.id })
        #expect(try alices.event.transaction?.description == "t0", "Alice's oldest first")
        #expect(try a.dueDeliveries(sink: "hook", at: Date(), limit: 10, excluding: []).isEmpty, "one out per child")
        // Its claimer settles it; then Alice's next is handed out.
        let claimer = byReplica[0].contains { $0.id == alices.id } ? a : b
        try claimer.record([(alices.id, .done(at: Date()))])
        let next = try b.dueDeliveries(sink: "hook", at: Date(), limit: 10, excluding: [])
        #expect(try next.map { try $0.event.transaction?.description } == ["t1"])
    }
}
