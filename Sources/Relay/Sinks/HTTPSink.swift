import AllowanceAPI
import Config
import Core
import Foundation
import HTTPTransport
import StoreContract

/// Every HTTP destination: the generic signed webhook and the chat and push services. Each kind differs only in
/// the request it builds; the answer is classified the same way for all.
public struct HTTPSink: Sink {
    public let config: SinkConfig
    let client: HTTPClient
    /// `relay.icon_url`, for ntfy.
    let icon: String?
    /// Where the messages edited in place are remembered (nil: each alert is a new message).
    let sent: (any SentMessageLedger)?
    let bursts = ChatBursts()
    let now: @Sendable () -> Date

    init(
        config: SinkConfig, client: HTTPClient = .shared, icon: String? = nil, sent: (any SentMessageLedger)? = nil,
        now: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.config = config
        self.client = client
        self.icon = icon
        self.sent = sent
        self.now = now
    }

    public func send(_ message: Message) async -> DeliveryOutcome {
        if let subject = editSubject(message), let sent {
            return await sendStanding(message, subject: subject, sent: sent)
        }
        if joinsBursts(message), let child = message.childId { return await sendInBurst(message, child: child) }
        if config.kind == .matrix, let image = message.image { return await sendMatrixPicture(message, image) }
        if config.kind == .slack, let image = message.image, config.showsPictures {
            return await sendSlackPicture(message, image)
        }
        return await post(message).outcome
    }

    /// Posts `message` as a new message; the answer, when it was delivered, says which message it made.
    func post(_ message: Message) async -> (outcome: DeliveryOutcome, answer: HTTPResponse?) {
        do {
            let response = try await client.send(request(for: message))
            return (Self.classify(response, kind: config.kind, slackAPI: config.token != nil), response)
        } catch {
            return (.retry("\(config.name): \(error.message)", after: nil), nil)
        }
    }

    /// The sink's URL without a trailing slash: the base an API's paths (Slack's methods, Matrix's, Telegram's bot)
    /// are put after.
    var root: String {
        let base = config.url?.absoluteString ?? "http://invalid"
        return base.hasSuffix("/") ? String(base.dropLast()) : base
    }

    /// How long one request may take (`timeout:` in seconds).
    var timeout: Duration { .milliseconds(Int64(config.timeout * 1000)) }

    /// The request for one message. Public for `notify test --dry-run` and the tests.
    public func request(for m: Message) -> HTTPRequest {
        let base = config.url ?? URL(string: "http://invalid")!
        var url = base
        var method = HTTPRequest.Method.post
        var headers = [String: String](minimumCapacity: 8)  // room for every kind's headers: no regrowth
        headers["Content-Type"] = "application/json"
        var body: [UInt8]
        let text = SinkConfig.cut(
            m.text, to: config.maxLength, html: config.kind == .telegram || config.kind == .matrix)
        switch config.kind {
        case .webhook:
            // `data` is the stored alert byte for byte (it already says the delivery's kind and the currency). One
            // buffer, sized once: joining arrays made one for each piece and each join.
            body = []
            body.reserveCapacity(m.kind.rawValue.utf8.count + m.at.utf8.count + m.alert.utf8.count + 34)
            body += #"{"type":""#.utf8
            body += m.kind.rawValue.utf8
            body += #"","timestamp":""#.utf8
            body += m.at.utf8
            body += #"","data":"#.utf8
            body += m.alert.utf8
            body.append(UInt8(ascii: "}"))
            headers["webhook-id"] = m.id
            headers["traceparent"] = m.traceParent
            let timestamp = Int(now().timeIntervalSince1970)
            headers["webhook-timestamp"] = String(timestamp)
            if !config.secrets.isEmpty {
                headers["webhook-signature"] = StandardWebhooks.signature(
                    id: m.id, timestamp: timestamp, body: body, secrets: config.secrets.map(\.value))
            }
        case .slack:
            let link = Self.slackLink(m)
            if let token = config.token {  // the Web API with a bot token: the message can be edited later
                url = URL(string: root + "/chat.postMessage") ?? base
                headers["Authorization"] = "Bearer \(token.value)"
                headers["Content-Type"] = "application/json; charset=utf-8"
                body = Array(
                    JSONValue.object([("channel", .string(config.channel ?? "")), ("text", .string(text + link))])
                        .serialized.utf8)
            } else {
                body = Array((["text": .string(text + link)] as JSONValue).serialized.utf8)
            }
        case .mattermost:
            let link = m.link.map { "\n[Open in Allowance Tracker](\($0))" } ?? ""
            body = Array((["text": .string(text + link)] as JSONValue).serialized.utf8)
        case .discord:
            var components = URLComponents(url: base, resolvingAgainstBaseURL: false)!
            components.queryItems = (components.queryItems ?? []) + [URLQueryItem(name: "wait", value: "true")]
            url = components.url ?? base
            // <...> around the URL: Discord shows the link without a preview card under every alert.
            let link = m.link.map { "\n[Open in Allowance Tracker](<\($0)>)" } ?? ""
            var payload: [(key: String, value: JSONValue)] = [
                ("content", .string(text + link)), ("allowed_mentions", ["parse": []]),
            ]
            if let u = config.username { payload.append(("username", .string(u))) }
            if m.urgency == .low { payload.append(("flags", 4096)) }  // silent
            body = Array(JSONValue.object(payload).serialized.utf8)
            if let image = m.image {
                // The message with its picture: the JSON as `payload_json`, the PNG as an attached file.
                var form = MultipartForm(boundary: m.id)
                form.field("payload_json", JSONValue.object(payload).serialized)
                form.file("files[0]", filename: "chart.png", type: "image/png", image)
                (body, headers["Content-Type"]) = (form.finished, form.contentType)
            }
        case .teams:
            var content: [(key: String, value: JSONValue)] = [
                ("type", "AdaptiveCard"), ("version", "1.4"),
                (
                    "body",
                    [
                        ["type": "TextBlock", "text": .string(m.title), "weight": "Bolder", "wrap": true],
                        ["type": "TextBlock", "text": .string(text), "wrap": true],
                    ]
                ),
            ]
            if let link = m.link {
                content.append(("actions", [["type": "Action.OpenUrl", "title": "Open", "url": .string(link)]]))
            }
            let card: JSONValue = [
                "type": "message",
                "attachments": [
                    ["contentType": "application/vnd.microsoft.card.adaptive", "content": .object(content)]
                ],
            ]
            body = Array(card.serialized.utf8)
        case .ntfy:
            headers["Content-Type"] = "text/plain; charset=utf-8"
            headers["Title"] = m.title
            headers["Priority"] = ["low": "2", "normal": "3", "critical": "5"][m.urgency.rawValue]
            headers["Tags"] =
                m.kind == .balanceLow || m.urgency == .critical
                ? "warning" : m.kind == .goalReached || m.kind == .goalPurchased ? "tada" : "moneybag"
            if let token = config.token { headers["Authorization"] = "Bearer \(token.value)" }
            // The text's values are escaped for Markdown (SinkConfig.escape), so a description stays text.
            headers["Markdown"] = "yes"
            if let link = m.link {
                headers["Click"] = link
                headers["Actions"] = "view, Open, \(link)"
            }
            if let icon = icon { headers["Icon"] = icon }
            // ntfy 2.16+ replaces the notification with the same sequence id (older servers post a new one).
            if let subject = editSubject(m) { headers["X-Sequence-ID"] = Self.ntfySequenceId(subject) }
            body = Array(text.utf8)
        case .gotify:
            url = base.appending(path: "message")
            headers["X-Gotify-Key"] = config.token?.value
            let priority = ["low": "2", "normal": "5", "critical": "8"][m.urgency.rawValue]!
            var payload: [(key: String, value: JSONValue)] = [
                ("title", .string(m.title)), ("message", .string(text)), ("priority", .number(priority)),
            ]
            if let link = m.link {
                payload.append(("extras", ["client::notification": ["click": ["url": .string(link)]]]))
            }
            body = Array(JSONValue.object(payload).serialized.utf8)
        case .matrix:
            method = .put
            let room = (config.room ?? "").addingPercentEncoding(withAllowedCharacters: Self.unreserved) ?? ""
            url = URL(string: root + "/_matrix/client/v3/rooms/\(room)/send/m.room.message/\(m.id)") ?? base
            headers["Authorization"] = "Bearer \(config.token?.value ?? "")"
            let link = m.link.map {
                (text: "\n" + $0, html: "<br><a href=\"\(SinkConfig.html($0))\">Open in Allowance Tracker</a>")
            }
            let payload: JSONValue = [
                "msgtype": "m.text", "body": .string(m.title + "\n" + text + (link?.text ?? "")),
                "format": "org.matrix.custom.html",
                "formatted_body": .string("<b>" + SinkConfig.html(m.title) + "</b><br>" + text + (link?.html ?? "")),
            ]
            body = Array(payload.serialized.utf8)
        case .telegram:
            url = URL(string: root + "/bot\(config.token?.value ?? "")/sendMessage") ?? base
            var payload: [(key: String, value: JSONValue)] = [
                ("chat_id", .string(config.chatId ?? "")), ("text", .string(text)), ("parse_mode", "HTML"),
                ("disable_notification", .bool(m.urgency == .low)),
            ]
            if let link = m.link {
                payload.append(("reply_markup", ["inline_keyboard": [[["text": "Open", "url": .string(link)]]]]))
            }
            body = Array(JSONValue.object(payload).serialized.utf8)
            if let image = m.image {
                // sendPhoto: the same fields as a form, the text as the caption (1,024 characters at most).
                url = URL(string: root + "/bot\(config.token?.value ?? "")/sendPhoto") ?? base
                var form = MultipartForm(boundary: m.id)
                for (key, value) in payload {
                    switch key {
                    case "text": form.field("caption", SinkConfig.cut(m.text, to: 1024, html: true))
                    case "chat_id", "parse_mode": form.field(key, value.stringValue ?? "")
                    default: form.field(key, value.serialized)
                    }
                }
                form.file("photo", filename: "chart.png", type: "image/png", image)
                (body, headers["Content-Type"]) = (form.finished, form.contentType)
            }
        case .desktop, .mqtt, .email:
            body = []
        }
        // Answers are read for their status and a hint: 64 KiB is plenty, and a destination cannot make us hold more.
        var request = HTTPRequest(
            method, url, body: body, timeout: timeout, maxResponseBytes: 64 * 1024)
        for (k, v) in headers.sorted(by: { $0.key < $1.key }) { request[header: k] = v }
        return request
    }

    /// What an answer means (destinations.md): 2xx done; 429 throttle the sink; 408/5xx/3xx retry; 410 and
    /// Discord's unknown webhook disable the sink; any other 4xx is a dead letter. Waits the server asks for come
    /// from `Retry-After` (seconds or an HTTP date), `retry_after` (Discord: seconds; Telegram:
    /// `parameters.retry_after`) or `retry_after_ms` (Matrix).
    ///
    /// Slack's Web API (`slackAPI`) answers 200 with `{"ok": false, "error": ...}` when it refused: read, not delivered.
    public static func classify(
        _ answer: HTTPResponse, kind: SinkConfig.Kind, slackAPI: Bool = false
    ) -> DeliveryOutcome {
        let status = answer.status
        if slackAPI, status == 200, let json = try? JSONValue(parsing: answer.body), json["ok"] == .bool(false) {
            return slackRefusal(json["error"]?.stringValue ?? "unknown_error")
        }
        let answerClass = AnswerClass(status: status)
        if answerClass == .success { return .delivered }  // the body is not read: nothing in it changes that
        let json = try? JSONValue(parsing: answer.body)
        let detail = Self.detail(json, answer.body)
        switch answerClass {
        case .success:
            return .delivered
        case .throttled:
            return .throttled("HTTP 429 (rate limited)\(detail)", after: retryAfter(answer, json))
        case .gone:
            return .disable("HTTP 410: the destination is gone\(detail)")
        case .refused where status == 404 && kind == .discord && json?["code"]?.intValue == 10015:
            return .disable("Discord says the webhook is unknown (deleted)\(detail)")
        case .transient:
            return .retry("HTTP \(status)\(detail)", after: retryAfter(answer, json))
        case .redirect:
            let location = answer.header("Location").map { " to \($0)" } ?? ""
            return .retry("HTTP \(status): redirect\(location) not followed; fix the sink's url", after: nil)
        case .refused:
            return .rejected("HTTP \(status)\(detail)")
        }
    }

    /// RFC 3986 unreserved characters: a Matrix room id's `!` and `:` are encoded, as the spec's examples show.
    static let unreserved = CharacterSet.alphanumerics.union(CharacterSet(charactersIn: "-._~"))

    /// The services' own fields first (Discord, Telegram, Matrix put the wait in the body), then `Retry-After`.
    static func retryAfter(_ answer: HTTPResponse, _ json: JSONValue?) -> TimeInterval? {
        if let ms = json?["retry_after_ms"]?.intValue { return Double(ms) / 1000 }
        if case .number(let n)? = json?["retry_after"], let s = Double(n) { return s }
        if let s = json?["parameters"]?["retry_after"]?.intValue { return Double(s) }
        return answer.retryAfter
    }

    /// A short hint from the answer's body (never the request: it may carry secrets).
    static func detail(_ json: JSONValue?, _ body: [UInt8]) -> String {
        let text =
            json?["message"]?.stringValue ?? json?["error"]?.stringValue ?? json?["description"]?.stringValue
            ?? String(decoding: body.prefix(200), as: UTF8.self)
        let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines).replacingOccurrences(of: "\n", with: " ")
        return trimmed.isEmpty ? "" : ": " + String(trimmed.prefix(200))
    }
}
