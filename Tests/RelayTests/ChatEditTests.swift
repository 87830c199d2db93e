import Alerts
import AllowanceAPI
import Config
import Foundation
import HTTPTransport
import PostgresTransport
import Relay
import SharedStore
import SignalRProtocol
import Store
import StoreContract
import Synchronization
import TestSupport
import Testing

/// A stand-in for one chat service that keeps its messages as the service would and answers as its API documents:
/// posts make messages with ids, edits change them (or fail as the service fails when the message is gone). Each
/// request is checked as the API documents it; what it got wrong is kept in `problems`.
final class ChatStandIn: Sendable {
    let kind: SinkConfig.Kind
    private struct State {
        var messages: [String: String] = [:]  // id -> text, in the chat now
        var order: [String] = []  // ids in the order they were posted
        var posts = 0
        var edits = 0
        var problems: [String] = []
        var matrixTxns: [String: String] = [:]
    }
    private let state = Mutex(State())

    init(_ kind: SinkConfig.Kind) { self.kind = kind }

    /// The chat as a person sees it now, each message's last line (Matrix puts the title above the text).
    var chat: [String] {
        state.withLock { s in s.order.compactMap { s.messages[$0]?.components(separatedBy: "\n").last } }
    }
    /// Each message whole, in the order posted.
    var fullChat: [String] { state.withLock { s in s.order.compactMap { s.messages[$0] } } }
    var posts: Int { state.withLock { $0.posts } }
    var edits: Int { state.withLock { $0.edits } }
    var problems: [String] { state.withLock { $0.problems } }
    func delete(_ index: Int) { state.withLock { s in s.messages[s.order[index]] = nil } }

    func yaml(_ base: URL, edit: Bool = true) -> String {
        let extra = edit ? "" : "    edit: false\n"
        switch kind {
        case .telegram:
            return
                "sinks:\n  chat:\n    type: telegram\n    url: \(base)\n    token: \"123:abc\"\n    chat_id: \"-100\"\n"
                + extra
        case .slack:
            return
                "sinks:\n  chat:\n    type: slack\n    url: \(base)/api\n    token: xoxb-test\n    channel: \"#family\"\n"
                + extra
        case .matrix:
            return
                "sinks:\n  chat:\n    type: matrix\n    url: \(base)\n    token: syt_test\n    room: \"!room:example.org\"\n"
                + extra
        case .discord: return "sinks:\n  chat:\n    type: discord\n    url: \(base)/api/webhooks/42/tok\n" + extra
        default: return "sinks:\n  chat:\n    type: ntfy\n    url: \(base)/family\n" + extra
        }
    }

    func answer(_ r: WebhookReceiver.Received) -> WebhookReceiver.Answer {
        state.withLock { s in
            func problem(_ p: String) -> WebhookReceiver.Answer {
                s.problems.append("\(r.method) \(r.path): \(p)")
                return .init(400, body: #"{"ok":false,"description":"stand-in: \#(p)"}"#)
            }
            func post(_ text: String) -> String {
                s.posts += 1
                let id = String(s.posts)
                s.messages[id] = text
                s.order.append(id)
                return id
            }
            func edit(_ id: String, _ text: String) -> Bool {
                guard s.messages[id] != nil else { return false }
                s.edits += 1
                s.messages[id] = text
                return true
            }
            let json = (try? JSONValue(parsing: r.body)) ?? .null
            switch kind {
            case .telegram:
                guard json["chat_id"]?.stringValue == "-100", let text = json["text"]?.stringValue,
                    json["parse_mode"]?.stringValue == "HTML"
                else {
                    return problem("chat_id, text and parse_mode are required")
                }
                if r.path == "/bot123:abc/sendMessage" {
                    let id = post(text)
                    return .init(
                        200, body: #"{"ok":true,"result":{"message_id":\#(id),"chat":{"id":-100},"date":1,"text":"x"}}"#
                    )
                }
                guard r.path == "/bot123:abc/editMessageText" else { return problem("unknown method") }
                guard case .number(let id)? = json["message_id"] else { return problem("message_id must be a number") }
                if json["disable_notification"] != nil { return problem("editMessageText has no disable_notification") }
                guard edit(id, text) else {
                    return .init(
                        400,
                        body: #"{"ok":false,"error_code":400,"description":"Bad Request: message to edit not found"}"#)
                }
                return .init(
                    200,
                    body:
                        #"{"ok":true,"result":{"message_id":\#(id),"chat":{"id":-100},"date":1,"edit_date":2,"text":"x"}}"#
                )
            case .slack:
                guard r.headers["authorization"] == "Bearer xoxb-test" else {
                    return .init(200, body: #"{"ok":false,"error":"not_authed"}"#)
                }
                guard r.headers["content-type"]?.hasPrefix("application/json") == true,
                    let text = json["text"]?.stringValue
                else {
                    return problem("a JSON body with text")
                }
                if r.path == "/api/chat.postMessage" {
                    guard json["channel"]?.stringValue == "#family" else {
                        return .init(200, body: #"{"ok":false,"error":"channel_not_found"}"#)
                    }
                    let id = post(text)
                    return .init(
                        200, body: #"{"ok":true,"channel":"C0FAMILY","ts":"1700000000.\#(id)","message":{"text":"x"}}"#)
                }
                guard r.path == "/api/chat.update" else { return .init(404, body: "unknown_method") }
                // chat.update takes the channel's id (the one chat.postMessage answered), not its name.
                guard json["channel"]?.stringValue == "C0FAMILY" else {
                    return .init(200, body: #"{"ok":false,"error":"channel_not_found"}"#)
                }
                guard let ts = json["ts"]?.stringValue, ts.hasPrefix("1700000000."),
                    edit(String(ts.dropFirst(11)), text)
                else {
                    return .init(200, body: #"{"ok":false,"error":"message_not_found"}"#)
                }
                return .init(200, body: #"{"ok":true,"channel":"C0FAMILY","ts":"\#(ts)","text":"x"}"#)
            case .matrix:
                // GET of an event (the sink asks whether its original still stands): a redacted one keeps its id but
                // loses its content and gains unsigned.redacted_because, as the spec's redaction algorithm says.
                let events = "/_matrix/client/v3/rooms/%21room%3Aexample.org/event/"
                if r.method == "GET", r.path.hasPrefix(events) {
                    guard r.headers["authorization"] == "Bearer syt_test" else {
                        return problem("GET of an event without the token")
                    }
                    let event = String(r.path.dropFirst(events.count)).removingPercentEncoding ?? ""
                    guard event.hasPrefix("$ev-"), s.order.contains(String(event.dropFirst(4))) else {
                        return .init(404, body: #"{"errcode":"M_NOT_FOUND","error":"Event not found."}"#)
                    }
                    if let text = s.messages[String(event.dropFirst(4))] {
                        let content = ["msgtype": "m.text", "body": JSONValue.string(text)] as JSONValue
                        return .init(
                            200,
                            body:
                                #"{"type":"m.room.message","event_id":"\#(event)","sender":"@relay:example.org","content":\#(content.serialized)}"#
                        )
                    }
                    return .init(
                        200,
                        body:
                            #"{"type":"m.room.message","event_id":"\#(event)","sender":"@relay:example.org","content":{},"unsigned":{"redacted_because":{"type":"m.room.redaction","sender":"@mum:example.org","redacts":"\#(event)","content":{}}}}"#
                    )
                }
                let prefix = "/_matrix/client/v3/rooms/%21room%3Aexample.org/send/m.room.message/"
                guard r.method == "PUT", r.path.hasPrefix(prefix), r.headers["authorization"] == "Bearer syt_test"
                else {
                    return problem("PUT to the room's send endpoint with the token")
                }
                let txn = String(r.path.dropFirst(prefix.count))
                // idempotent
                if let earlier = s.matrixTxns[txn] { return .init(200, body: #"{"event_id":"\#(earlier)"}"#) }
                guard json["msgtype"]?.stringValue == "m.text", let body = json["body"]?.stringValue else {
                    return problem("msgtype and body")
                }
                let event: String
                if let relation = json["m.relates_to"] {
                    guard relation["rel_type"]?.stringValue == "m.replace",
                        let original = relation["event_id"]?.stringValue,
                        let new = json["m.new_content"]?["body"]?.stringValue, body.hasPrefix("* "),
                        json["m.new_content"]?["msgtype"]?.stringValue == "m.text"
                    else {
                        return problem("an edit needs m.relates_to m.replace, m.new_content and a fallback body with *")
                    }
                    // The server keeps the edit as an event of its own, whether or not the original still stands.
                    s.edits += 1
                    if s.messages[String(original.dropFirst(4))] != nil {
                        s.messages[String(original.dropFirst(4))] = new
                    }
                    event = "$ed-\(s.edits)"
                } else {
                    event = "$ev-" + post(body)
                }
                s.matrixTxns[txn] = event
                return .init(200, body: #"{"event_id":"\#(event)"}"#)
            case .discord:
                guard let content = json["content"]?.stringValue, json["allowed_mentions"] != nil else {
                    return problem("content and allowed_mentions")
                }
                if r.method == "POST", r.path == "/api/webhooks/42/tok" {
                    // without wait there is no message to learn
                    guard r.query.contains("wait=true") else { return .init(204) }
                    let id = post(content)
                    return .init(200, body: #"{"id":"\#(id)","type":0,"content":"x","channel_id":"7"}"#)
                }
                guard r.method == "PATCH", r.path.hasPrefix("/api/webhooks/42/tok/messages/") else {
                    return problem("PATCH .../messages/{id}")
                }
                if json["username"] != nil || json["flags"] != nil {
                    return problem("an edit cannot change username or flags")
                }
                let id = String(r.path.dropFirst("/api/webhooks/42/tok/messages/".count))
                guard edit(id, content) else { return .init(404, body: #"{"message":"Unknown Message","code":10008}"#) }
                return .init(200, body: #"{"id":"\#(id)","type":0,"content":"x","channel_id":"7"}"#)
            default:  // ntfy 2.16+: the same sequence id replaces the notification
                guard r.method == "POST", r.path == "/family" else { return problem("POST to the topic") }
                let text = r.text
                if let sequence = r.headers["x-sequence-id"] {
                    guard sequence.range(of: "^[-_A-Za-z0-9]{1,64}$", options: .regularExpression) != nil else {
                        return problem("sequence id \(sequence)")
                    }
                    if s.messages[sequence] != nil {
                        s.edits += 1
                        s.messages[sequence] = text
                    } else {
                        s.posts += 1
                        s.messages[sequence] = text
                        s.order.append(sequence)
                    }
                } else {
                    _ = post(text)
                }
                return .init(200, body: #"{"id":"x","time":1,"event":"message","topic":"family"}"#)
            }
        }
    }
}

func temporaryPath() -> String {
    FileManager.default.temporaryDirectory.appending(path: "chat-\(UUID())/relay.sqlite").path
}

@Suite(.serialized) struct ChatEditTests {
    static let services: [SinkConfig.Kind] = [.telegram, .slack, .matrix, .discord, .ntfy]

    func balance(_ amount: String, id: String) -> Message {
        let event = RelayEvent(
            kind: .balanceUpdated, at: Date(), childId: alice, childName: "Alice", balance: Decimal(string: amount)!)
        return Message(
            id: id, kind: .balanceUpdated, urgency: .normal, title: "Alice", text: "Alice's balance: \(amount)",
            event: event)
    }

    func transaction(id: String) -> Message {
        let e = created(RelayTests.transaction("1.00", after: "5.00"))
        return Message(
            id: id, kind: .transactionCreated, urgency: .normal, title: "Alice", text: "Alice spent 1.00", event: e)
    }

    func withStandIn(_ kind: SinkConfig.Kind, _ body: (ChatStandIn, URL) async throws -> Void) async throws {
        let standIn = ChatStandIn(kind)
        let receiver = WebhookReceiver { r, _ in standIn.answer(r) }
        try await receiver.run { base in try await body(standIn, base) }
    }

    func sink(_ yaml: String, _ store: any SentMessageLedger & ChildRoster & GoalStore) throws -> any Sink {
        let config = try AlertSettings.parse(yaml, file: "t.yaml")
        return makeSink(config.sinks[0], memory: store)
    }

    @Test(arguments: services) func aChildsBalanceIsOneMessageEditedInPlaceAlsoAfterARestart(
        _ kind: SinkConfig.Kind
    ) async throws {
        try await withStandIn(kind) { standIn, base in
            let store = try Store.open(path: temporaryPath())
            var chat = try sink(standIn.yaml(base), store)
            #expect(await chat.send(balance("10.00", id: "dlv_1")) == .delivered)
            #expect(await chat.send(transaction(id: "dlv_2")) == .delivered)
            #expect(await chat.send(balance("9.00", id: "dlv_3")) == .delivered)
            chat = try sink(standIn.yaml(base), store)  // a restart: the message's id comes from the database
            #expect(await chat.send(balance("8.50", id: "dlv_4")) == .delivered)
            #expect(standIn.problems.isEmpty, "\(standIn.problems)")
            #expect(standIn.posts == 2 && standIn.edits == 2, "posts \(standIn.posts), edits \(standIn.edits)")
            #expect(standIn.chat == ["Alice's balance: 8.50", "Alice spent 1.00"], "\(standIn.chat)")
        }
    }

    /// Matrix takes an edit of a redacted event (its clients then show nothing): the sink asks first and posts anew.
    @Test(arguments: [SinkConfig.Kind.telegram, .slack, .matrix, .discord])
    func aDeletedMessageIsPostedAnewAndTheNewOneEdited(_ kind: SinkConfig.Kind) async throws {
        try await withStandIn(kind) { standIn, base in
            let store = try Store.open(path: temporaryPath())
            let chat = try sink(standIn.yaml(base), store)
            #expect(await chat.send(balance("10.00", id: "dlv_1")) == .delivered)
            standIn.delete(0)  // someone deleted it in the chat
            #expect(await chat.send(balance("9.00", id: "dlv_2")) == .delivered)
            #expect(await chat.send(balance("8.00", id: "dlv_3")) == .delivered)
            #expect(standIn.problems.isEmpty, "\(standIn.problems)")
            #expect(standIn.chat == ["Alice's balance: 8.00"], "\(standIn.chat)")
            #expect(standIn.posts == 2 && standIn.edits == 1)
        }
    }

    @Test(arguments: [SinkConfig.Kind.telegram, .slack, .matrix, .discord]) func aMessageTooOldToEditIsPostedAnew(
        _ kind: SinkConfig.Kind
    ) async throws {
        try await withStandIn(kind) { standIn, base in
            let store = try Store.open(path: temporaryPath())
            let chat = try sink(standIn.yaml(base), store)
            #expect(await chat.send(balance("10.00", id: "dlv_1")) == .delivered)
            let kept = try #require(try store.sentMessage(sink: "chat", subject: "balance:\(alice.lowercased)"))
            try store.setSentMessage(
                sink: "chat", subject: "balance:\(alice.lowercased)",
                SentMessage(ref: kept.ref, postedAt: Date().addingTimeInterval(-SinkConfig.editWindow - 60)))
            #expect(await chat.send(balance("9.00", id: "dlv_2")) == .delivered)
            #expect(standIn.posts == 2 && standIn.edits == 0)
            #expect(
                try store.sentMessage(sink: "chat", subject: "balance:\(alice.lowercased)")?.ref != kept.ref,
                "the new message is the one kept")
        }
    }

    /// With replicas the message's reference lives in the shared database: the replica that posted a child's balance
    /// dies, and the next one to send a change edits that same message instead of posting a second.
    @Test(arguments: services) func aBalanceMessagePostedByAReplicaThatDiedIsEditedByTheNext(
        _ kind: SinkConfig.Kind
    ) async throws {
        let cluster = try await PostgresCluster()
        let location = try PostgresLocation(cluster.url(database: try await cluster.createDatabase()))
        try await withStandIn(kind) { standIn, base in
            let first = try SharedRelayStore.open(location, password: cluster.password, replica: "first")
            #expect(await (try sink(standIn.yaml(base), first)).send(balance("10.00", id: "dlv_1")) == .delivered)
            first.close()  // the replica is gone, its process memory with it
            let next = try SharedRelayStore.open(location, password: cluster.password, replica: "next")
            defer { next.close() }
            #expect(await (try sink(standIn.yaml(base), next)).send(balance("9.00", id: "dlv_2")) == .delivered)
            #expect(standIn.problems.isEmpty, "\(standIn.problems)")
            #expect(standIn.posts == 1 && standIn.edits == 1, "posts \(standIn.posts), edits \(standIn.edits)")
            #expect(standIn.chat == ["Alice's balance: 9.00"], "\(standIn.chat)")
        }
    }

    @Test(arguments: services) func editFalsePostsEveryChange(_ kind: SinkConfig.Kind) async throws {
        try await withStandIn(kind) { standIn, base in
            let store = try Store.open(path: temporaryPath())
            let chat = try sink(standIn.yaml(base, edit: false), store)
            #expect(await chat.send(balance("10.00", id: "dlv_1")) == .delivered)
            #expect(await chat.send(balance("9.00", id: "dlv_2")) == .delivered)
            #expect(standIn.posts == 2 && standIn.edits == 0)
        }
    }

    /// A burst of a child's transactions is one message, edited as each comes ("Alice: 3 transactions"), as the
    /// desktop's popup is; a balance message between them is a message of its own.
    @Test(arguments: [SinkConfig.Kind.telegram, .slack, .matrix, .discord]) func aBurstOfTransactionsIsOneMessage(
        _ kind: SinkConfig.Kind
    ) async throws {
        try await withStandIn(kind) { standIn, base in
            let store = try Store.open(path: temporaryPath())
            let chat = try sink(standIn.yaml(base), store)
            for (i, text) in ["Alice spent 1.00", "Alice spent 2.00", "Alice got 5.00"].enumerated() {
                var m = transaction(id: "dlv_t\(i)")
                m.text = text
                #expect(await chat.send(m) == .delivered)
                if i == 0 { #expect(await chat.send(balance("9.00", id: "dlv_b")) == .delivered) }
            }
            #expect(standIn.problems.isEmpty, "\(standIn.problems)")
            #expect(standIn.posts == 2 && standIn.edits == 2, "posts \(standIn.posts), edits \(standIn.edits)")
            let burst = try #require(standIn.chat.first.map { _ in standIn.fullChat[0] })
            #expect(
                burst.contains("Alice: 3 transactions") && burst.contains("Alice spent 1.00")
                    && burst.hasSuffix("Alice got 5.00"), "\(burst)")
        }
    }

    /// Slack's Web API says no with HTTP 200: that is not a delivery.
    @Test func slacksRefusalsInA200AreNotDeliveries() {
        let refused = HTTPResponse(status: 200, body: Array(#"{"ok":false,"error":"invalid_auth"}"#.utf8))
        #expect(
            HTTPSink.classify(refused, kind: .slack, slackAPI: true)
                == .rejected("Slack refused the bot token: invalid_auth"))
        let limited = HTTPResponse(status: 200, body: Array(#"{"ok":false,"error":"ratelimited"}"#.utf8))
        guard case .throttled = HTTPSink.classify(limited, kind: .slack, slackAPI: true) else {
            Issue.record("ratelimited is a wait")
            return
        }
        #expect(
            HTTPSink.classify(HTTPResponse(status: 200, body: Array("ok".utf8)), kind: .slack) == .delivered,
            "the incoming webhook answers ok")
    }

    @Test func aSlackBotTokenNeedsAChannel() {
        #expect(throws: ConfigErrors.self) {
            try AlertSettings.parse("sinks:\n  chat:\n    type: slack\n    token: xoxb-1\n", file: "t.yaml")
        }
        #expect(throws: Never.self) {
            try AlertSettings.parse(
                "sinks:\n  chat:\n    type: slack\n    token: xoxb-1\n    channel: C1\n", file: "t.yaml")
        }
    }
}
