import AllowanceAPI
import Config
import Foundation
import HubSimulator
import Relay
import SignalRProtocol
import Store
import TestSupport
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The family-server setup: the real binary, the simulator, and real HTTP receivers for a signed webhook and a
/// chat tool. Each server transaction must reach each sink, and survive `kill -9`.
@Suite(.serialized, .timeLimit(.minutes(3))) struct AlertEndToEndTests {
    static let secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

    func writeConfig(hook: URL, chat: URL) throws -> String {
        let dir = FileManager.default.temporaryDirectory.appending(path: "relay-alerts-\(UUID())")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let secretFile = dir.appending(path: "whsec").path
        try Self.secret.write(toFile: secretFile, atomically: true, encoding: .utf8)
        chmod(secretFile, 0o600)
        let yaml = """
            sinks:
              audit:
                type: webhook
                url: \(hook.absoluteString)/allowance
                secret_file: \(secretFile)
              family-chat:
                type: slack
                url: \(chat.absoluteString)/services/T/B/X
                rate_limit: 200/s
                # The transaction's id in each message, so that a test can tell which transactions the chat got.
                link: https://allowance.example.org/t/{transaction_id}
                templates:
                  transaction.created: "{child} {amount} ({description}) {link}"
            rules:
              - name: every transaction, one alert each
                event: transaction.created
                to: [audit, family-chat]
                digest: false
            """
        let file = dir.appending(path: "relay.yaml").path
        try yaml.write(toFile: file, atomically: true, encoding: .utf8)
        return file
    }

    /// The transaction ids the webhook receiver acknowledged, with how many deliveries it saw in all.
    func acknowledged(_ hook: WebhookReceiver) -> (ids: Set<String>, requests: Int, distinctDeliveries: Int) {
        let ids = Set(hook.received.compactMap(Scenario.transactionId))
        return (ids, hook.received.count, Set(hook.received.compactMap { $0.headers["webhook-id"] }).count)
    }

    /// The transactions the chat's messages name (by the id in their link).
    func chatTransactionIds(_ chat: WebhookReceiver) -> Set<String> { Set(chatMentions(chat)) }

    /// Each mention of a transaction in the chat, in order, repeats kept: what the family reads twice.
    func chatMentions(_ chat: WebhookReceiver) -> [String] {
        chat.received.flatMap { r in
            r.text.matches(of: /\/t\/([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})/).map {
                String($0.output.1)
            }
        }
    }

    func serverTransactionIds(_ base: URL) async throws -> Set<String> {
        Set(try await ServerTruth.transactions(base).map { $0.id.uuidString.lowercased() })
    }

    @Test func eachTransactionReachesTheSignedWebhookAndTheChatOnce() async throws {
        let hook = WebhookReceiver()
        let chat = WebhookReceiver()
        try await hook.run { hookURL in
            try await chat.run { chatURL in
                try await withSim { base in
                    let config = try writeConfig(hook: hookURL, chat: chatURL)
                    let storePath = URL(fileURLWithPath: config).deletingLastPathComponent().appending(
                        path: "relay.sqlite"
                    ).path
                    let relay = try RelayProcess(
                        env: simRelayEnv(base, store: storePath), arguments: ["run", "--config", config])
                    #expect(await relay.waitFor("caught up"))
                    try await simPost(base, "/_sim/burst?count=20")
                    #expect(
                        await eventually { hook.received.count >= 20 && chat.received.count >= 20 },
                        "\(relay.output.suffix(2000))")
                    #expect(
                        await ledgerSettled(try Store.open(path: storePath)), "a repeat would have been sent by now")
                    await relay.expectCleanStop()
                    let server = try await serverTransactionIds(base)
                    #expect(acknowledged(hook).ids == server && hook.received.count == 20 && chat.received.count == 20)
                    #expect(chatTransactionIds(chat) == server, "each transaction in the chat, once")
                    #expect(!relay.output.contains("MfKQ9r8"), "the webhook secret never reaches the logs")
                    // Every request verifies with the Standard Webhooks reference library.
                    try #require(PythonPeer.available)
                    let lines = hook.received.map { r -> String in
                        let headers: JSONValue = [
                            "webhook-id": .string(r.headers["webhook-id"] ?? ""),
                            "webhook-timestamp": .string(r.headers["webhook-timestamp"] ?? ""),
                            "webhook-signature": .string(r.headers["webhook-signature"] ?? ""),
                        ]
                        return
                            (["secret": .string(Self.secret), "body": .string(r.text), "headers": headers] as JSONValue)
                            .serialized
                    }
                    let verified = try await PythonPeer.run(
                        script: "verify_standard_webhooks.py", input: lines.joined(separator: "\n") + "\n")
                    #expect(
                        verified.status == 0 && verified.output.split(separator: "\n").count == 20, "\(verified.output)"
                    )
                }
            }
        }
    }

    @Test func killedDuringADeliveryBurstEveryAlertStillArrives() async throws {
        var random = SeededRandom(seed: testSeed)
        let hook = WebhookReceiver { _, _ in .init(200, delay: .milliseconds(25)) }  // a receiver that takes its time
        let chat = WebhookReceiver()
        try await hook.run { hookURL in
            try await chat.run { chatURL in
                try await withSim { base in
                    let config = try writeConfig(hook: hookURL, chat: chatURL)
                    let env = [
                        "ALLOWANCE_RELAY_SERVER_URL": base.absoluteString, "ALLOWANCE_RELAY_SERVER_TOKEN": "e2e-token",
                        "ALLOWANCE_RELAY_STORE_PATH": FileManager.default.temporaryDirectory.appending(
                            path: "relay-alert-kill-\(UUID())/relay.sqlite"
                        ).path,
                    ]
                    var kills = 0
                    for round in 1...4 {
                        let relay = try RelayProcess(env: env, arguments: ["run", "--config", config])
                        #expect(await relay.waitFor("connected to the hub"))
                        if round == 1 { try await simPost(base, "/_sim/burst?count=80") }
                        let delay = Int(random.next() % 800) + 100
                        try await Task.sleep(for: .milliseconds(delay))
                        _ = await relay.stop(signal: SIGKILL)
                        kills += 1
                        print(
                            "alert crash test: round \(round) killed after \(delay) ms; \(hook.received.count) webhook requests so far"
                        )
                    }
                    let last = try RelayProcess(env: env, arguments: ["run", "--config", config])
                    // Up before it is stopped (the kills may have left nothing to send: SIGTERM must not meet a start).
                    #expect(await last.waitFor("connected to the hub"))
                    let server = try await serverTransactionIds(base)
                    let done = await eventually(.seconds(60)) {
                        acknowledged(hook).ids == server && chatTransactionIds(chat) == server
                    }
                    #expect(
                        done,
                        "acknowledged \(acknowledged(hook).ids.count) of \(server.count); the chat named \(chatTransactionIds(chat).count)"
                    )
                    await last.expectCleanStop()
                    let seen = acknowledged(hook)
                    // A kill between the receiver's 2xx and our commit re-sends the deliveries whose outcome was not
                    // written yet, with the same webhook-id: at most the sink's concurrency (default 4) per kill. The
                    // receiver can drop them by their id.
                    let duplicates = seen.requests - seen.distinctDeliveries
                    print(
                        "alert crash test: \(server.count) transactions, \(seen.requests) webhook requests, \(duplicates) repeated ids after \(kills) kills"
                    )
                    #expect(duplicates <= kills * SinkConfig(name: "hook", kind: .webhook).concurrency)
                    #expect(seen.distinctDeliveries == server.count, "one delivery id per transaction")
                    // The chat cannot drop a repeat by its id: the family reads it twice. The same bound holds there,
                    // counted in the chat as the family sees it (a set would hide them).
                    let mentions = chatMentions(chat)
                    let chatRepeats = mentions.count - Set(mentions).count
                    print("alert crash test: \(chatRepeats) transactions repeated in the chat after \(kills) kills")
                    #expect(
                        chatRepeats <= kills * SinkConfig(name: "family-chat", kind: .slack).concurrency,
                        "\(chatRepeats) repeats in the chat")
                }
            }
        }
    }
}
