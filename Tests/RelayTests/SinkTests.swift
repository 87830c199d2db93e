import Alerts
import AllowanceAPI
import Config
import Foundation
import HTTPTransport
import Relay
import SignalRProtocol
import Store
import TestSupport
import Testing

@Suite struct StandardWebhooksTests {
    @Test func theSpecsExampleVector() {
        // From the Standard Webhooks spec; the PyPI reference library gives the same.
        let sig = StandardWebhooks.signature(
            id: "msg_p5jXN8AQM9LWM0D4loKWxJek", timestamp: 1_614_265_330, body: Array(#"{"test": 2432232314}"#.utf8),
            secrets: ["whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"])
        #expect(sig == "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=")
    }

    @Test func duringARotationEverySecretSigns() {
        let sig = StandardWebhooks.signature(
            id: "m", timestamp: 1, body: [], secrets: ["whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "whsec_c2Vjb25k"])
        #expect(sig.split(separator: " ").count == 2 && sig.split(separator: " ").allSatisfy { $0.hasPrefix("v1,") })
    }
}

@Suite struct AnswerClassificationTests {
    /// Retry-After as an HTTP date (RFC 9110) is a wait from now; one in the past is no wait.
    @Test func retryAfterAsAnHTTPDateIsAWaitFromNow() {
        let f = DateFormatter()
        f.locale = Locale(identifier: "en_US_POSIX")
        f.timeZone = TimeZone(identifier: "GMT")
        f.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
        for (offset, expected) in [(30.0, 30.0), (-30, 0)] {
            let header = f.string(from: Date().addingTimeInterval(offset))
            guard
                case .throttled(_, let after?) = HTTPSink.classify(
                    HTTPResponse(status: 429, headers: [("Retry-After", header)]), kind: .slack)
            else {
                Issue.record("no wait read from \(header)")
                continue
            }
            #expect(abs(after - expected) < 2, "\(header): \(after) s")
        }
    }

    @Test(arguments: [
        (200, [String: String](), "", SinkConfig.Kind.webhook, DeliveryOutcome.delivered),
        (204, [:], "", .discord, .delivered),
        (429, ["Retry-After": "7"], "", .slack, .throttled("HTTP 429 (rate limited)", after: 7)),
        (
            429, [:], #"{"retry_after": 1.5, "global": false}"#, .discord,
            .throttled("HTTP 429 (rate limited)", after: 1.5)
        ),
        (
            429, [:], #"{"errcode":"M_LIMIT_EXCEEDED","retry_after_ms":2500}"#, .matrix,
            .throttled("HTTP 429 (rate limited)", after: 2.5)
        ),
        (
            429, [:], #"{"ok":false,"parameters":{"retry_after":3}}"#, .telegram,
            .throttled("HTTP 429 (rate limited)", after: 3)
        ),
        (503, ["Retry-After": "4"], "", .webhook, .retry("HTTP 503", after: 4)),
        (500, [:], "", .webhook, .retry("HTTP 500", after: nil)),
        (408, [:], "", .webhook, .retry("HTTP 408", after: nil)),
        (410, [:], "channel_is_archived", .slack, .disable("HTTP 410: the destination is gone")),
        (
            404, [:], #"{"message": "Unknown Webhook", "code": 10015}"#, .discord,
            .disable("Discord says the webhook is unknown (deleted)")
        ),
        (404, [:], "", .webhook, .rejected("HTTP 404")),
        (400, [:], #"{"message":"bad"}"#, .webhook, .rejected("HTTP 400")),
    ])
    func eachAnswerHasItsOutcome(
        _ status: Int, _ headers: [String: String], _ body: String, _ kind: SinkConfig.Kind, _ expected: DeliveryOutcome
    ) {
        let outcome = HTTPSink.classify(
            HTTPResponse(status: status, headers: headers.map { ($0.key, $0.value) }, body: Array(body.utf8)),
            kind: kind)
        switch (outcome, expected) {
        case (.delivered, .delivered): break
        case (.throttled(let a, let x), .throttled(let b, let y)), (.retry(let a, let x), .retry(let b, let y)):
            #expect(a.hasPrefix(b) && x == y, "\(outcome)")
        case (.disable(let a), .disable(let b)), (.rejected(let a), .rejected(let b)):
            #expect(a.hasPrefix(b), "\(outcome)")
        default:
            Issue.record("\(status) \(kind): got \(outcome), expected \(expected)")
        }
    }
}

/// Each destination's request, as a real HTTP receiver sees it.
@Suite(.serialized) struct DestinationRequestTests {
    func message(_ text: String = "Alice: -$7.77 <b>", urgency: PlannedDelivery.Urgency = .normal) -> Message {
        let e = created(transaction("7.77", after: "13.16"))
        return Message(
            id: "dlv_fixed-id", kind: .transactionCreated, urgency: urgency, title: "Alice -$7.77", text: text, event: e
        )
    }

    func send(
        _ yaml: String, _ m: Message, answer: WebhookReceiver.Answer = .init()
    ) async throws -> (DeliveryOutcome, WebhookReceiver.Received) {
        let receiver = WebhookReceiver { _, _ in answer }
        var result: (DeliveryOutcome, WebhookReceiver.Received)?
        try await receiver.run { base in
            let config = try AlertSettings.parse(
                yaml.replacingOccurrences(of: "BASE", with: base.absoluteString), file: "t.yaml")
            let outcome = await makeSink(config.sinks[0]).send(m)
            #expect(receiver.received.count == 1, "one request per message (and no redirect followed)")
            result = (outcome, try #require(receiver.received.first))
        }
        return try #require(result)
    }

    @Test func genericWebhookIsSignedAndVerifiesWithTheReferenceLibrary() async throws {
        let secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
        let (outcome, r) = try await send(
            "sinks:\n  hook:\n    type: webhook\n    url: BASE/hooks/allowance\n    secret: \(secret)\n", message())
        #expect(outcome == .delivered)
        #expect(r.method == "POST" && r.path == "/hooks/allowance")
        #expect(r.headers["webhook-id"] == "dlv_fixed-id")
        let body = try JSONValue(parsing: r.body)
        #expect(body["type"] == "transaction.created")
        #expect(body["data"]?["transaction"]?["amount"] == .string("7.77"), "money as an exact decimal string")
        #expect(body["data"]?["childName"] == "Alice" && body["timestamp"]?.stringValue != nil)
        try #require(PythonPeer.available, "the Python venv with standardwebhooks (make test makes it)")
        let line: JSONValue = [
            "secret": .string(secret), "body": .string(r.text),
            "headers": [
                "webhook-id": .string(r.headers["webhook-id"] ?? ""),
                "webhook-timestamp": .string(r.headers["webhook-timestamp"] ?? ""),
                "webhook-signature": .string(r.headers["webhook-signature"] ?? ""),
            ],
        ]
        let tampered: JSONValue = [
            "secret": .string(secret), "body": .string(r.text.replacingOccurrences(of: "7.77", with: "9.99")),
            "headers": line["headers"]!,
        ]
        let good = try await PythonPeer.run(script: "verify_standard_webhooks.py", input: line.serialized + "\n")
        #expect(good.status == 0, "\(good.output)")
        let bad = try await PythonPeer.run(script: "verify_standard_webhooks.py", input: tampered.serialized + "\n")
        #expect(bad.status == 1 && bad.output.hasPrefix("bad"), "a changed body fails verification: \(bad.output)")
    }

    @Test func slackGetsTextWithItsMarkupEscapedByTheTemplateLayer() async throws {
        let (outcome, r) = try await send(
            "sinks:\n  chat:\n    type: slack\n    url: BASE/services/T/B/X\n", message("Fish &amp; chips"))
        #expect(outcome == .delivered && r.path == "/services/T/B/X")
        #expect(try JSONValue(parsing: r.body) == ["text": "Fish &amp; chips"])
    }

    @Test func discordWaitsForTheAnswerSuppressesMentionsAndKeepsTo2000Characters() async throws {
        let long = String(repeating: "x", count: 2500)
        let (_, r) = try await send(
            "sinks:\n  chat:\n    type: discord\n    url: BASE/api/webhooks/1/tok\n", message(long, urgency: .low))
        #expect(r.query == "wait=true")
        let body = try JSONValue(parsing: r.body)
        #expect(body["allowed_mentions"] == ["parse": []])
        #expect(body["content"]?.stringValue?.count == 2000)
        #expect(body["flags"] == 4096, "low urgency is a silent message")
    }

    @Test func teamsGetsAnAdaptiveCard() async throws {
        let (_, r) = try await send("sinks:\n  t:\n    type: teams\n    url: BASE/workflows/x\n", message())
        let card = try JSONValue(parsing: r.body)["attachments"]?.arrayValue?.first
        #expect(card?["contentType"] == "application/vnd.microsoft.card.adaptive")
        #expect(card?["content"]?["type"] == "AdaptiveCard" && card?["content"]?["body"]?.arrayValue?.count == 2)
    }

    @Test func ntfyGetsTitlePriorityAndAPlainBody() async throws {
        let (_, r) = try await send(
            "sinks:\n  phone:\n    type: ntfy\n    url: BASE/family-money\n    token: tk_secret\n",
            message(urgency: .critical))
        #expect(r.path == "/family-money" && r.text == "Alice: -$7.77 <b>")
        #expect(
            r.headers["title"] == "Alice -$7.77" && r.headers["priority"] == "5"
                && r.headers["authorization"] == "Bearer tk_secret")
    }

    @Test func gotifyGetsItsKeyAndPriority() async throws {
        let (_, r) = try await send("sinks:\n  g:\n    type: gotify\n    url: BASE\n    token: AbCd\n", message())
        #expect(r.path == "/message" && r.headers["x-gotify-key"] == "AbCd")
        #expect(try JSONValue(parsing: r.body)["priority"] == 5)
    }

    @Test func matrixPutsWithTheDeliveryIdAsTransactionId() async throws {
        let (_, r) = try await send(
            "sinks:\n  m:\n    type: matrix\n    url: BASE\n    token: syt_x\n    room: \"!abc:example.org\"\n",
            message())
        #expect(r.method == "PUT")
        #expect(r.path == "/_matrix/client/v3/rooms/%21abc%3Aexample.org/send/m.room.message/dlv_fixed-id")
        #expect(r.headers["authorization"] == "Bearer syt_x")
        #expect(try JSONValue(parsing: r.body)["msgtype"] == "m.text")
    }

    @Test func telegramSendsHTMLToTheChat() async throws {
        let (_, r) = try await send(
            "sinks:\n  tg:\n    type: telegram\n    url: BASE\n    token: \"123:abc\"\n    chat_id: \"42\"\n", message()
        )
        #expect(r.path == "/bot123:abc/sendMessage")
        let body = try JSONValue(parsing: r.body)
        #expect(body["chat_id"] == "42" && body["parse_mode"] == "HTML")
    }

    @Test func aRedirectIsReportedNotFollowed() async throws {
        let (outcome, _) = try await send(
            "sinks:\n  hook:\n    type: webhook\n    url: BASE/old\n", message(),
            answer: .init(301, headers: ["Location": "/new"]))
        guard case .retry(let reason, _) = outcome else {
            Issue.record("\(outcome)")
            return
        }
        #expect(reason.contains("301") && reason.contains("not followed"))
    }

    /// A destination that accepts the connection and never answers (TestSupport's proxy in blackhole mode): the
    /// send ends at the sink's timeout_seconds as a retry, and the wait costs the HTTP client's thread nothing.
    /// URLSession alone did not end it (it waited, busy, for over a minute), which held the sink's worker for good.
    @Test func aDestinationThatNeverAnswersIsARetryAtTheSinksTimeout() async throws {
        let silent = try TCPProxy(to: 9)
        defer { silent.close() }
        silent.mode = .blackhole
        let config = try AlertSettings.parse(
            "sinks:\n  hook:\n    type: webhook\n    url: http://127.0.0.1:\(silent.port)/hook\n    timeout_seconds: 1\n",
            file: "t.yaml")
        let cpuBefore = threadCPUSeconds(named: "http")
        let outcome = await makeSink(config.sinks[0]).send(message())
        let waited = threadCPUSeconds(named: "http") - cpuBefore
        guard case .retry(let reason, _) = outcome else {
            Issue.record("\(outcome)")
            return
        }
        #expect(reason.contains("no answer from 127.0.0.1 within 1.0 seconds"), "\(reason)")
        #expect(silent.accepted == 1)
        // A second of waiting; the busy wait this replaced spent all of it (other suites' requests add a little).
        #expect(waited < 0.25, "the HTTP thread spent \(waited) s of CPU waiting 1 s for a silent peer")
    }
}

/// Text from the server reaching people: it reads as typed, and never becomes markup, a link, a ping, a second
/// log line or a reversed filename.
@Suite struct ServerTextTests {
    private func text(_ kind: String, description: String) throws -> String {
        let config = try AlertSettings.parse(
            "sinks:\n  s:\n    type: \(kind)\n    url: https://chat.example/hook\n    chat_id: '1'\n    token: t\n    room: '!r:x'\n",
            file: "t.yaml")
        let e = created(transaction("1.50", after: "2.00", description: description))
        return config.message(
            id: "d", kind: .transactionCreated, urgency: .normal, event: e, sink: config.sinks[0], markup: true
        ).text
    }

    @Test(arguments: ["discord", "teams", "mattermost"])
    func markdownLinksAndMentionsInADescriptionStayText(_ kind: String) throws {
        let t = try text(kind, description: "[free money](http://evil.example/) @here *now*")
        #expect(t.contains(#"\[free money\](http://evil.example/) @\#u{200B}here \*now\*"#), "\(t)")
        #expect(t.contains("$1.50"), "amounts are untouched: \(t)")
    }

    @Test func controlAndBidiCharactersAreNotShownAsSuch() throws {
        let t = try text("discord", description: "a\u{202E}gpj.exe\nforged line\u{1B}[2J")
        #expect(!t.unicodeScalars.contains { $0.value < 0x20 || $0.value == 0x202E }, "\(t.debugDescription)")
        #expect(t.contains("agpj.exe forged line"))
    }

    @Test func telegramTextIsNeverCutInsideAnEntity() throws {
        let long = String(repeating: "&", count: 5000)
        let t = try text("telegram", description: long)
        let config = try AlertSettings.parse("sinks:\n  s: tgram://123:abc/42\n", file: "t.yaml")
        let body = try #require(
            (makeSink(config.sinks[0]) as? HTTPSink)?.request(
                for: Message(
                    id: "d", kind: .transactionCreated, urgency: .normal, title: "t", text: t,
                    event: created(transaction("1", after: "1")))
            ).body)
        let sent = try #require(try JSONValue(parsing: Array(body))["text"]?.stringValue)
        #expect(sent.count <= 4096 && sent.hasSuffix("&amp;"), "ends on a whole entity: …\(sent.suffix(12))")
    }

    @Test func aServerValueIsStoredWithoutNULAndCutToItsDocumentedSize() throws {
        let json = try JSONValue(
            parsing: Array(
                #"""
                {"id":"00000000-0000-4000-8000-000000000001","childId":"11111111-1111-4111-8111-111111111111","amount":1,"type":"Credit",
                 "description":"before\u0000after\#(String(repeating: "x", count: 10_000))","balanceAfter":1,"createdAt":"2026-11-22T10:00:00Z",
                 "createdByName":"Pat"}
                """#.utf8))
        let t = try Transaction(json: json)
        #expect(
            t.description.hasPrefix("beforeafterxxx") && t.description.count == SafeText.maxDescription,
            "\(t.description.count)")
        #expect(t.description.hasSuffix("…"))
    }

    @Test func aLogLineShowsWhatAValueHoldsOnOneLine() throws {
        var t = transaction("1", after: "1", description: "Candy\nerror allowance-relay: forged\u{1B}[31m")
        t.createdByName = "Pat\u{202E}"
        let line = HubEvent.transactionCreated(t).summary
        #expect(!line.contains("\n") && !line.contains("\u{1B}"))
        #expect(
            line.contains(#"description="Candy\nerror allowance-relay: forged\u{1B}[31m" by="Pat\u{202E}""#), "\(line)")
    }
}

/// CPU seconds (user + system) spent so far by this process's threads of that name (/proc/self/task/*/stat).
func threadCPUSeconds(named name: String) -> Double {
    let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []
    let ticks = Double(sysconf(Int32(_SC_CLK_TCK)))
    return tasks.reduce(0) { sum, tid in
        guard
            (try? String(contentsOfFile: "/proc/self/task/\(tid)/comm", encoding: .utf8))?.trimmingCharacters(
                in: .newlines) == name,
            let stat = try? String(contentsOfFile: "/proc/self/task/\(tid)/stat", encoding: .utf8),
            let close = stat.lastIndex(of: ")")
        else { return sum }
        // After "pid (comm) ": state is field 3; utime and stime are fields 14 and 15.
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        return sum + ((Double(fields[11]) ?? 0) + (Double(fields[12]) ?? 0)) / ticks
    }
}
