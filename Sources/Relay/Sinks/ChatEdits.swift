import Alerts
import Config
import Core
import Foundation
import HTTPTransport
import StoreContract
import Synchronization

/// Editing a child's balance message in place, as each service documents it:
/// - Telegram: `editMessageText` with the `message_id` that `sendMessage` returned (`result.message_id`);
/// - Slack (bot token): `chat.update` with the channel id and `ts` that `chat.postMessage` returned;
/// - Matrix: a new `m.room.message` event with `m.new_content` and `m.relates_to` `{rel_type: m.replace}` naming
///   the first event (`event_id` of its answer);
/// - Discord: `PATCH /webhooks/{id}/{token}/messages/{message_id}`, the id from the first post's answer
///   (`?wait=true`);
/// - ntfy (2.16+): every balance message of a child carries the same `X-Sequence-ID`; the server replaces it.
/// A message the service no longer has (deleted), or older than `SinkConfig.editWindow`, is posted anew and the new
/// one is remembered. The references live in the database and survive restarts.
extension HTTPSink {
    /// What the message stands for when the next one of its kind edits it: a child's balance; nil: a message of its own.
    func editSubject(_ m: Message) -> String? {
        guard config.edit, config.canEdit, m.kind == .balanceUpdated, let child = m.childId else { return nil }
        return "balance:\(child.lowercased)"
    }

    /// Whether `m` may join a burst of its child's transactions: one message edited while they come less than
    /// `ChatBursts.window` apart, as the desktop's popup does (not ntfy: its sequence ids replace, they do not list).
    func joinsBursts(_ m: Message) -> Bool {
        config.edit && config.canEdit && config.kind != .ntfy && m.kind == .transactionCreated && m.childId != nil
    }

    /// A transaction: the message of its child's burst says it too ("Alice: 3 transactions" and the last four), or,
    /// outside a burst, it is posted and starts one.
    func sendInBurst(_ m: Message, child: UUID) async -> DeliveryOutcome {
        let at = now()
        if let burst = bursts.join(child, id: m.id, text: m.text, at: at), let ref = burst.ref,
            let edit = editRequest(for: burstMessage(m, burst.lines), ref: ref), !(await originalIsGone(ref, for: m))
        {
            let answer: HTTPResponse
            do { answer = try await client.send(edit) } catch {
                return .retry("\(config.name): \(error.message)", after: nil)
            }
            if !messageIsGone(answer) { return Self.classify(answer, kind: config.kind, slackAPI: config.token != nil) }
        }
        let (outcome, answer) = await post(m)
        if outcome == .delivered {
            bursts.start(child, id: m.id, text: m.text, ref: answer.flatMap(messageRef), at: at)
        }
        return outcome
    }

    /// The burst's message: a line with the child and the count, then the last four transactions' texts.
    func burstMessage(_ m: Message, _ lines: [String]) -> Message {
        var burst = m
        let name = m.childName.isEmpty ? "Transactions" : m.childName
        burst.title = "\(name): \(lines.count) transactions"
        let shown = lines.suffix(4).joined(separator: "\n")
        burst.text =
            config.escape(burst.title, markup: true) + "\n" + shown
            + (lines.count > 4 ? "\n(and \(lines.count - 4) before)" : "")
        return burst
    }

    /// ntfy's sequence ids are `[-_A-Za-z0-9]{1,64}`: `balance-` and the child's id without dashes.
    static func ntfySequenceId(_ subject: String) -> String {
        String(
            subject.unicodeScalars.filter { CharacterSet.alphanumerics.contains($0) || $0 == ":" }.map {
                $0 == ":" ? "-" : Character($0)
            }.prefix(64))
    }

    func sendStanding(_ m: Message, subject: String, sent: any SentMessageLedger) async -> DeliveryOutcome {
        if config.kind == .ntfy { return await post(m).outcome }  // the sequence id in the request is the edit
        if let prior = try? sent.sentMessage(sink: config.name, subject: subject),
            now().timeIntervalSince(prior.postedAt) < SinkConfig.editWindow,
            let edit = editRequest(for: m, ref: prior.ref), !(await originalIsGone(prior.ref, for: m))
        {
            let answer: HTTPResponse
            do { answer = try await client.send(edit) } catch {
                return .retry("\(config.name): \(error.message)", after: nil)
            }
            if !messageIsGone(answer) {
                let outcome = Self.classify(answer, kind: config.kind, slackAPI: config.token != nil)
                // Telegram refuses an edit that changes nothing; the message already says it.
                if outcome != .delivered, config.kind == .telegram,
                    Self.detail(try? JSONValue(parsing: answer.body), answer.body).contains("not modified")
                {
                    return .delivered
                }
                return outcome
            }
            try? sent.setSentMessage(sink: config.name, subject: subject, nil)
        }
        let (outcome, answer) = await post(m)
        if outcome == .delivered, let answer, let ref = messageRef(answer) {
            // Not recorded (a full disk): the next change posts a new message, nothing is lost.
            try? sent.setSentMessage(sink: config.name, subject: subject, SentMessage(ref: ref, postedAt: now()))
        }
        return outcome
    }

    /// The service's reference to the message a post made, from its answer.
    func messageRef(_ answer: HTTPResponse) -> String? {
        guard let json = try? JSONValue(parsing: answer.body) else { return nil }
        switch config.kind {
        case .telegram:
            return json["result"]?["message_id"].flatMap { if case .number(let n) = $0 { n } else { nil } }
        case .slack:
            guard let channel = json["channel"]?.stringValue, let ts = json["ts"]?.stringValue else { return nil }
            return channel + " " + ts  // chat.update wants the channel's id, which the answer gives even for a name
        case .matrix:
            return json["event_id"]?.stringValue
        case .discord:
            return json["id"]?.stringValue
        default:
            return nil
        }
    }

    /// Matrix takes an edit of a redacted event, and clients then show nothing: before an edit, the homeserver is asked
    /// whether the original still stands (`GET /rooms/{room}/event/{id}`; a redacted event comes back with empty
    /// `content` and `unsigned.redacted_because`, a purged one as 404). Other services refuse the edit itself. An
    /// answer that says neither (a network error, a 5xx) leaves the edit to go ahead.
    func originalIsGone(_ ref: String, for m: Message) async -> Bool {
        guard config.kind == .matrix else { return false }
        var check = request(for: m)
        let post = check.url.absoluteString
        guard let send = post.range(of: "/send/", options: .backwards),
            let id = ref.addingPercentEncoding(
                withAllowedCharacters: .alphanumerics.union(CharacterSet(charactersIn: "-._~"))),
            let url = URL(string: post[..<send.lowerBound] + "/event/" + id)
        else { return false }
        check.url = url
        check.method = .get
        check.body = []
        guard let answer = try? await client.send(check) else { return false }
        if answer.status == 404 { return true }
        guard answer.status == 200, let event = try? JSONValue(parsing: answer.body) else { return false }
        return event["unsigned"]?["redacted_because"] != nil
    }

    /// Whether an edit failed because the message is gone (deleted, or one the service will not edit): post anew.
    func messageIsGone(_ answer: HTTPResponse) -> Bool {
        let json = try? JSONValue(parsing: answer.body)
        switch config.kind {
        case .telegram:
            let text = (json?["description"]?.stringValue ?? "").lowercased()
            return answer.status == 400
                && (text.contains("message to edit not found") || text.contains("can't be edited"))
        case .slack:
            return ["message_not_found", "cant_update_message", "edit_window_closed"].contains(
                json?["error"]?.stringValue ?? "")
        case .discord:
            return answer.status == 404 && json?["code"]?.intValue == 10008  // Unknown Message
        default:
            return false
        }
    }

    /// The request that edits the message `ref` to say what `m` says: the post's own request, turned into an edit, so
    /// that the text is rendered in one place.
    func editRequest(for m: Message, ref: String) -> HTTPRequest? {
        var request = request(for: m)
        guard case .object(var payload)? = try? JSONValue(parsing: request.body) else { return nil }
        func set(_ key: String, _ value: JSONValue) {
            payload.removeAll { $0.key == key }
            payload.append((key, value))
        }
        let base = request.url.absoluteString
        switch config.kind {
        case .telegram:
            guard let sendMessage = base.range(of: "/sendMessage", options: .backwards) else { return nil }
            request.url =
                URL(string: base.replacingCharacters(in: sendMessage, with: "/editMessageText")) ?? request.url
            payload.removeAll { $0.key == "disable_notification" }  // not a field of an edit
            set("message_id", .number(ref))
        case .slack:
            let parts = ref.split(separator: " ", maxSplits: 1).map(String.init)
            guard parts.count == 2, let post = base.range(of: "/chat.postMessage", options: .backwards) else {
                return nil
            }
            request.url = URL(string: base.replacingCharacters(in: post, with: "/chat.update")) ?? request.url
            set("channel", .string(parts[0]))
            set("ts", .string(parts[1]))
        case .matrix:
            // A new event that replaces the first one; its own transaction id, so it is not taken for the post.
            request.url = request.url.deletingLastPathComponent().appending(path: "\(m.id).edit")
            let new = JSONValue.object(payload)
            payload = [
                ("msgtype", "m.text"), ("body", .string("* " + (new["body"]?.stringValue ?? ""))),
                ("format", "org.matrix.custom.html"),
                ("formatted_body", .string("* " + (new["formatted_body"]?.stringValue ?? ""))),
                ("m.new_content", new), ("m.relates_to", ["rel_type": "m.replace", "event_id": .string(ref)]),
            ]
        case .discord:
            guard var c = URLComponents(url: request.url, resolvingAgainstBaseURL: false) else { return nil }
            c.path += "/messages/\(ref)"
            c.queryItems = c.queryItems?.filter { $0.name != "wait" }  // `thread_id` stays
            if c.queryItems?.isEmpty == true { c.queryItems = nil }
            request.url = c.url ?? request.url
            request.method = .patch
            payload.removeAll { ["username", "flags"].contains($0.key) }  // an edit cannot change them
        default:
            return nil
        }
        request.body = Array(JSONValue.object(payload).serialized.utf8)
        return request
    }

    /// Slack's Web API refusals (`{"ok": false, "error": ...}`): a bad token or channel will not mend by itself.
    static func slackRefusal(_ error: String) -> DeliveryOutcome {
        switch error {
        case "ratelimited": .throttled("Slack: ratelimited", after: nil)
        case "invalid_auth", "not_authed", "account_inactive", "token_revoked", "token_expired", "no_permission",
            "missing_scope":
            .rejected("Slack refused the bot token: \(error)")
        case "channel_not_found", "not_in_channel", "is_archived", "msg_too_long", "no_text", "invalid_blocks":
            .rejected("Slack: \(error)")
        default: .retry("Slack: \(error)", after: nil)
        }
    }
}

/// Per child, the chat message of the burst of transactions under way: kept by this process only (after a restart,
/// the next transaction starts a new burst).
final class ChatBursts: Sendable {
    /// How long after a child's last transaction the next one still joins its message.
    static let window: TimeInterval = 10

    struct Burst {
        var ref: String?
        var last: Date
        /// The texts of the burst's transactions by delivery id (a retried delivery is not listed twice).
        var lines: [(id: String, text: String)]
    }

    private let bursts = Mutex<[UUID: Burst]>([:])

    /// The burst the transaction joins, with its line added, or nil when none is under way.
    func join(_ child: UUID, id: String, text: String, at now: Date) -> (ref: String?, lines: [String])? {
        bursts.withLock { b in
            guard var burst = b[child], now.timeIntervalSince(burst.last) < Self.window else { return nil }
            if !burst.lines.contains(where: { $0.id == id }) { burst.lines.append((id, text)) }
            burst.last = now
            b[child] = burst
            return (burst.ref, burst.lines.map(\.text))
        }
    }

    /// A transaction posted as a message of its own: the burst starts with it.
    func start(_ child: UUID, id: String, text: String, ref: String?, at now: Date) {
        bursts.withLock { $0[child] = Burst(ref: ref, last: now, lines: [(id, text)]) }
    }
}
