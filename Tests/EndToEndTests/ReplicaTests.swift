import AllowanceAPI
import Core
import Foundation
import TestSupport
import Testing

/// Relays as replicas on one real PostgreSQL server (`store.url`): the real binary, the simulator, a real webhook
/// receiver. Each run ends with every transaction the server made during it delivered, a repeat only under the same
/// webhook-id (at most the sink's concurrency, here 1, per kill), and no pause between deliveries longer than 5 s.
@Suite(.serialized, .timeLimit(.minutes(4))) struct ReplicaTests {
    /// A replica's environment: the shared store, its own name and local file.
    func env(
        _ base: URL, _ cluster: PostgresCluster, database: String, passwordFile: String, name: String
    ) -> [String: String] {
        [
            "ALLOWANCE_RELAY_SERVER_URL": base.absoluteString, "ALLOWANCE_RELAY_SERVER_TOKEN": "e2e-token",
            "ALLOWANCE_RELAY_STORE_URL": cluster.url(database: database),
            "ALLOWANCE_RELAY_STORE_PASSWORD_FILE": passwordFile,
            "ALLOWANCE_RELAY_STORE_REPLICA_NAME": name,
            "ALLOWANCE_RELAY_STORE_PATH": FileManager.default.temporaryDirectory.appending(
                path: "replica-\(name)-\(UUID())/relay.sqlite"
            ).path,
        ]
    }

    func writeConfig(hook: URL) throws -> String {
        let dir = FileManager.default.temporaryDirectory.appending(path: "replica-config-\(UUID())")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let yaml = """
            sinks:
              audit:
                type: webhook
                url: \(hook.absoluteString)/allowance
                concurrency: 1
            rules:
              - name: every transaction
                event: transaction.created
                to: [audit]
                digest: false
            """
        let file = dir.appending(path: "relay.yaml").path
        try yaml.write(toFile: file, atomically: true, encoding: .utf8)
        return file
    }

    struct Setup {
        let cluster: PostgresCluster
        let database: String
        let passwordFile: String
    }

    func withCluster(_ body: (Setup) async throws -> Void) async throws {
        let cluster = try PostgresCluster()
        let database = try cluster.createDatabase()
        let passwordFile = cluster.dir.appending(path: "relay-password").path
        try cluster.password.write(toFile: passwordFile, atomically: true, encoding: .utf8)
        chmod(passwordFile, 0o600)
        try await body(Setup(cluster: cluster, database: database, passwordFile: passwordFile))
    }

    /// The longest pause between two webhook arrivals.
    func longestGap(_ hook: WebhookReceiver) -> Duration {
        let times = hook.arrivals.sorted()
        return zip(times, times.dropFirst()).map { $1 - $0 }.max() ?? .zero
    }

    func serverIds(_ base: URL) async throws -> Set<String> {
        Set(try await Scenario.serverTransactions(base).map { $0.id.uuidString.lowercased() })
    }

    /// Waits for the replicas to agree on one link holder; returns its index.
    func linkHolder(_ relays: [RelayProcess]) async -> Int? {
        var holder: Int?
        _ = await eventually(.seconds(15)) {
            holder = relays.firstIndex {
                $0.output.components(separatedBy: "holds the hub link").count
                    > $0.output.components(separatedBy: "no longer holds").count
            }
            return holder != nil
        }
        return holder
    }

    @Test(arguments: [2, 3]) func theLinkHolderKilledDuringAPacedRunIsTakenOverAndNothingIsLost(
        replicas: Int
    ) async throws {
        let hook = WebhookReceiver()
        try await withCluster { setup in
            try await hook.run { hookURL in
                try await withSim { base in
                    let config = try writeConfig(hook: hookURL)
                    let names = (0..<replicas).map { "r\($0)" }
                    var relays: [RelayProcess] = []
                    for name in names {
                        relays.append(
                            try RelayProcess(
                                env: env(
                                    base, setup.cluster, database: setup.database, passwordFile: setup.passwordFile,
                                    name: name),
                                arguments: ["run", "--config", config]))
                    }
                    guard let first = await linkHolder(relays) else {
                        Issue.record("no replica took the hub link:\n\(relays.map { $0.output.suffix(2000) })")
                        return
                    }
                    #expect(await relays[first].waitFor("took the family's history"))
                    let before = try await serverIds(base)
                    let paced = Task { try await simPost(base, "/_sim/paced?count=60&rate=10") }
                    try await Task.sleep(for: .seconds(2))
                    _ = await relays[first].stop(signal: SIGKILL)
                    let others = relays.indices.filter { $0 != first }.map { relays[$0] }
                    let next = await linkHolder(others)
                    #expect(next != nil, "another replica takes the link")
                    try await paced.value
                    let made = try await serverIds(base).subtracting(before)
                    #expect(made.count == 60)
                    let all = await eventually(.seconds(60)) {
                        Set(hook.received.compactMap(Scenario.transactionId)) == made
                    }
                    let got = Set(hook.received.compactMap(Scenario.transactionId))
                    #expect(all, "delivered \(got.intersection(made).count) of \(made.count)")
                    let ids = hook.received.compactMap { $0.headers["webhook-id"] }
                    let repeats = ids.count - Set(ids).count
                    print(
                        "replica test (\(replicas)): \(made.count) transactions, \(hook.received.count) requests, \(repeats) repeated ids, longest gap \(longestGap(hook)), link taken over after the kill"
                    )
                    #expect(repeats <= 1, "at most one repeat per kill with concurrency 1")
                    #expect(longestGap(hook) < .seconds(5), "no pause over 5 s")

                    // status lists the replicas and the new holder.
                    let status = try RelayProcess(
                        env: env(
                            base, setup.cluster, database: setup.database, passwordFile: setup.passwordFile, name: "cli"
                        ),
                        arguments: ["status", "--json", "--config", config])
                    _ = await eventually(.seconds(10)) { status.output.contains("linkHolder") }
                    guard let json = try? JSONValue(parsing: Array(status.output.utf8)) else {
                        Issue.record("status --json: \(status.output)")
                        return
                    }
                    #expect(json["replicas"]?.arrayValue?.count == replicas)
                    #expect(
                        names.filter { $0 != names[first] }.contains(json["linkHolder"]?.stringValue ?? ""),
                        "\(status.output)")
                    #expect(
                        !status.output.contains(setup.cluster.password)
                            && !relays.contains { $0.output.contains(setup.cluster.password) })
                    // A command that would read or write the local file says so rather than show nothing.
                    let outbox = try RelayProcess(
                        env: env(
                            base, setup.cluster, database: setup.database, passwordFile: setup.passwordFile, name: "cli"
                        ),
                        arguments: ["outbox", "retry", "1", "--config", config])
                    #expect(await outbox.wait() == 69)
                    #expect(outbox.output.contains("works on the SQLite store only"), "\(outbox.output)")
                    let listed = try await RelayProcess.output(
                        ["transactions", "--json", "--limit", "100", "--config", config],
                        env: env(
                            base, setup.cluster, database: setup.database, passwordFile: setup.passwordFile, name: "cli"
                        ))
                    #expect(
                        made.isSubset(
                            of: Set(
                                (try? JSONValue(parsing: Array(listed.utf8)))?.arrayValue?.compactMap {
                                    $0["id"]?.stringValue
                                } ?? [])))
                    for r in others { await r.expectCleanStop() }
                }
            }
        }
    }

    @Test func aReplicaKilledWhileHoldingClaimsHasThemSentByAnother() async throws {
        // A receiver slow enough that each replica holds a claim most of the time.
        let hook = WebhookReceiver { _, _ in .init(200, delay: .milliseconds(150)) }
        try await withCluster { setup in
            try await hook.run { hookURL in
                try await withSim { base in
                    let config = try writeConfig(hook: hookURL)
                    let relays = try ["a", "b"].map { name in
                        try RelayProcess(
                            env: env(
                                base, setup.cluster, database: setup.database, passwordFile: setup.passwordFile,
                                name: name),
                            arguments: ["run", "--config", config])
                    }
                    guard let holder = await linkHolder(relays) else {
                        Issue.record("no link holder")
                        return
                    }
                    #expect(await relays[holder].waitFor("took the family's history"))
                    let other = 1 - holder
                    let before = try await serverIds(base)
                    try await simPost(base, "/_sim/burst?count=40")
                    // The other replica has started sending (it claimed from the shared ledger), then it dies.
                    #expect(await eventually(.seconds(20)) { hook.received.count >= 5 })
                    _ = await relays[other].stop(signal: SIGKILL)
                    let made = try await serverIds(base).subtracting(before)
                    let all = await eventually(.seconds(60)) {
                        Set(hook.received.compactMap(Scenario.transactionId)) == made
                    }
                    #expect(
                        all,
                        "delivered \(Set(hook.received.compactMap(Scenario.transactionId)).intersection(made).count) of \(made.count)"
                    )
                    let ids = hook.received.compactMap { $0.headers["webhook-id"] }
                    print(
                        "replica claim test: \(made.count) transactions, \(ids.count) requests, \(ids.count - Set(ids).count) repeated ids, longest gap \(longestGap(hook))"
                    )
                    #expect(ids.count - Set(ids).count <= 1)
                    #expect(longestGap(hook) < .seconds(5))
                    await relays[holder].expectCleanStop()
                }
            }
        }
    }

    @Test func theDatabaseRestartedUnderTheReplicasLosesNothing() async throws {
        let hook = WebhookReceiver()
        try await withCluster { setup in
            try await hook.run { hookURL in
                try await withSim { base in
                    let config = try writeConfig(hook: hookURL)
                    let relays = try ["a", "b"].map { name in
                        try RelayProcess(
                            env: env(
                                base, setup.cluster, database: setup.database, passwordFile: setup.passwordFile,
                                name: name),
                            arguments: ["run", "--config", config])
                    }
                    guard let holder = await linkHolder(relays) else {
                        Issue.record("no link holder")
                        return
                    }
                    #expect(await relays[holder].waitFor("took the family's history"))
                    let before = try await serverIds(base)
                    let paced = Task { try await simPost(base, "/_sim/paced?count=40&rate=10") }
                    try await Task.sleep(for: .seconds(1))
                    setup.cluster.stop()
                    try await Task.sleep(for: .seconds(1))
                    try setup.cluster.start()
                    try await paced.value
                    let made = try await serverIds(base).subtracting(before)
                    let all = await eventually(.seconds(60)) {
                        Set(hook.received.compactMap(Scenario.transactionId)) == made
                    }
                    #expect(
                        all,
                        "delivered \(Set(hook.received.compactMap(Scenario.transactionId)).intersection(made).count) of \(made.count)"
                    )
                    let ids = hook.received.compactMap { $0.headers["webhook-id"] }
                    print(
                        "replica restart test: \(made.count) transactions, \(ids.count) requests, \(ids.count - Set(ids).count) repeated ids, longest gap \(longestGap(hook))"
                    )
                    #expect(ids.count - Set(ids).count <= 2, "a repeat only under the same id")
                    #expect(longestGap(hook) < .seconds(5))
                    for r in relays { await r.expectCleanStop() }
                }
            }
        }
    }
    /// `transaction add` on the shared store while the backend is down: the writes wait in the shared outbox, and
    /// once it is back a replica sends them, each once and in the order they were made.
    @Test func writesQueuedOnTheSharedOutboxReachTheServerOnceAndInOrder() async throws {
        let hook = WebhookReceiver()
        try await withCluster { setup in
            try await hook.run { hookURL in
                try await withSim { base in
                    let config = try writeConfig(hook: hookURL)
                    let relays = try ["a", "b"].map { name in
                        try RelayProcess(
                            env: env(
                                base, setup.cluster, database: setup.database, passwordFile: setup.passwordFile,
                                name: name),
                            arguments: ["run", "--config", config])
                    }
                    guard let holder = await linkHolder(relays) else {
                        Issue.record("no link holder")
                        return
                    }
                    #expect(await relays[holder].waitFor("took the family's history"))
                    try await simPost(base, "/_sim/down")
                    let cli = env(
                        base, setup.cluster, database: setup.database, passwordFile: setup.passwordFile, name: "cli")
                    for n in 1...3 {
                        let out = try await RelayProcess.output(
                            [
                                "transaction", "add", "--child", "Alice", "--amount", "1.0\(n)", "--type", "credit",
                                "--description", "shared write \(n)",
                                "--config", config,
                            ], env: cli)
                        #expect(out.contains("Queued as outbox #\(n)"), "\(out)")
                    }
                    let waiting = try await RelayProcess.output(
                        ["outbox", "list", "--json", "--config", config], env: cli)
                    #expect(waiting.contains("shared write 3"))
                    try await Task.sleep(for: .seconds(1))
                    try await simPost(base, "/_sim/up")
                    let sent = await eventually(.seconds(60)) {
                        let list =
                            (try? await RelayProcess.output(["outbox", "list", "--json", "--config", config], env: cli))
                            ?? ""
                        return list.components(separatedBy: "\"sent\"").count - 1 == 3
                    }
                    #expect(sent, "every write sent")
                    let server = try await Scenario.serverTransactions(base).filter {
                        $0.description.hasPrefix("shared write")
                    }
                    #expect(
                        server.sorted { $0.createdAt < $1.createdAt }.map(\.description) == [
                            "shared write 1", "shared write 2", "shared write 3",
                        ])
                    for r in relays { await r.expectCleanStop() }
                }
            }
        }
    }
}
