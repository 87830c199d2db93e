import AllowanceAPI
import Foundation
import SignalRProtocol
import Store

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Every HTTP destination: the generic signed webhook and the chat and push services. Each kind differs only in
/// the request it builds; the answer is classified the same way for all.
public struct HTTPSink: Sink {
    public let config: SinkConfig
    let client: HTTPClient
    let now: @Sendable () -> Date

    init(config: SinkConfig, client: HTTPClient = .shared, now: @escaping @Sendable () -> Date = { Date() }) {
        self.config = config
        self.client = client
        self.now = now
    }

    public func send(_ message: Message) async -> DeliveryOutcome {
        let request = self.request(for: message)
        do {
            let (body, response) = try await client.send(request)
            return Self.classify(status: response.statusCode, headers: response.allHeaderFields, body: body, kind: config.kind)
        } catch {
            return .retry("\(config.name): \((error as NSError).localizedDescription)", after: nil)
        }
    }

    /// The request for one message. Public for `notify test --dry-run` and the tests.
    public func request(for m: Message) -> URLRequest {
        let base = config.url ?? URL(string: "http://invalid")!
        let root = base.absoluteString.hasSuffix("/") ? String(base.absoluteString.dropLast()) : base.absoluteString
        var url = base
        var method = "POST"
        var headers: [String: String] = ["Content-Type": "application/json", "User-Agent": "allowance-relay"]
        var body: [UInt8]
        let text = SinkConfig.cut(m.text, to: config.maxLength, html: config.kind == .telegram || config.kind == .matrix)
        switch config.kind {
        case .webhook:
            // A derived alert (balance.low from a transaction) says its own kind in `data` too, with what caused it.
            var alert = m.event
            alert.kind = m.kind
            let payload: JSONValue = [
                "type": .string(m.kind.rawValue), "timestamp": .string(ISO8601DateFormatter().string(from: m.event.at)),
                "data": alert.json(currency: m.currency),
            ]
            body = Array(payload.serialized.utf8)
            headers["webhook-id"] = m.id
            let timestamp = Int(now().timeIntervalSince1970)
            headers["webhook-timestamp"] = String(timestamp)
            if !config.secrets.isEmpty {
                headers["webhook-signature"] = StandardWebhooks.signature(id: m.id, timestamp: timestamp, body: body, secrets: config.secrets.map(\.value))
            }
        case .slack, .mattermost:
            body = Array((["text": .string(text)] as JSONValue).serialized.utf8)
        case .discord:
            var components = URLComponents(url: base, resolvingAgainstBaseURL: false)!
            components.queryItems = (components.queryItems ?? []) + [URLQueryItem(name: "wait", value: "true")]
            url = components.url ?? base
            var payload: [(key: String, value: JSONValue)] = [("content", .string(text)), ("allowed_mentions", ["parse": []])]
            if let u = config.username { payload.append(("username", .string(u))) }
            if m.urgency == .low { payload.append(("flags", 4096)) }  // silent
            body = Array(JSONValue.object(payload).serialized.utf8)
        case .teams:
            let card: JSONValue = [
                "type": "message",
                "attachments": [
                    [
                        "contentType": "application/vnd.microsoft.card.adaptive",
                        "content": [
                            "type": "AdaptiveCard", "version": "1.4",
                            "body": [
                                ["type": "TextBlock", "text": .string(m.title), "weight": "Bolder", "wrap": true],
                                ["type": "TextBlock", "text": .string(text), "wrap": true],
                            ],
                        ],
                    ]
                ],
            ]
            body = Array(card.serialized.utf8)
        case .ntfy:
            headers["Content-Type"] = "text/plain; charset=utf-8"
            headers["Title"] = m.title
            headers["Priority"] = ["low": "2", "normal": "3", "critical": "5"][m.urgency.rawValue]
            headers["Tags"] = m.kind == .balanceLow || m.urgency == .critical ? "warning" : "moneybag"
            if let token = config.token { headers["Authorization"] = "Bearer \(token.value)" }
            body = Array(text.utf8)
        case .gotify:
            url = base.appending(path: "message")
            headers["X-Gotify-Key"] = config.token?.value
            let priority = ["low": "2", "normal": "5", "critical": "8"][m.urgency.rawValue]!
            body = Array((["title": .string(m.title), "message": .string(text), "priority": .number(priority)] as JSONValue).serialized.utf8)
        case .matrix:
            method = "PUT"
            let room = (config.room ?? "").addingPercentEncoding(withAllowedCharacters: Self.unreserved) ?? ""
            url = URL(string: root + "/_matrix/client/v3/rooms/\(room)/send/m.room.message/\(m.id)") ?? base
            headers["Authorization"] = "Bearer \(config.token?.value ?? "")"
            let payload: JSONValue = [
                "msgtype": "m.text", "body": .string(m.title + "\n" + text), "format": "org.matrix.custom.html",
                "formatted_body": .string("<b>" + SinkConfig.html(m.title) + "</b><br>" + text),
            ]
            body = Array(payload.serialized.utf8)
        case .telegram:
            url = URL(string: root + "/bot\(config.token?.value ?? "")/sendMessage") ?? base
            let payload: JSONValue = [
                "chat_id": .string(config.chatId ?? ""), "text": .string(text), "parse_mode": "HTML",
                "disable_notification": .bool(m.urgency == .low),
            ]
            body = Array(payload.serialized.utf8)
        case .desktop:
            body = []
        }
        var request = URLRequest(url: url, timeoutInterval: config.timeout)
        request.httpMethod = method
        for (k, v) in headers { request.setValue(v, forHTTPHeaderField: k) }
        request.httpBody = Data(body)
        return request
    }

    /// What an answer means (destinations.md): 2xx done; 429 throttle the sink; 408/5xx/3xx retry; 410 and
    /// Discord's unknown webhook disable the sink; any other 4xx is a dead letter. Waits the server asks for come
    /// from `Retry-After` (seconds or an HTTP date), `retry_after` (Discord: seconds; Telegram:
    /// `parameters.retry_after`) or `retry_after_ms` (Matrix).
    public static func classify(status: Int, headers: [AnyHashable: Any], body: Data, kind: SinkConfig.Kind) -> DeliveryOutcome {
        let json = try? JSONValue(parsing: Array(body))
        let detail = Self.detail(json, body)
        switch status {
        case 200..<300:
            return .delivered
        case 429:
            return .throttled("HTTP 429 (rate limited)\(detail)", after: retryAfter(headers, json))
        case 410:
            return .disable("HTTP 410: the destination is gone\(detail)")
        case 404 where kind == .discord && json?["code"]?.intValue == 10015:
            return .disable("Discord says the webhook is unknown (deleted)\(detail)")
        case 408, 500..<600:
            return .retry("HTTP \(status)\(detail)", after: retryAfter(headers, json))
        case 300..<400:
            let location = header("Location", headers).map { " to \($0)" } ?? ""
            return .retry("HTTP \(status): redirect\(location) not followed; fix the sink's url", after: nil)
        default:
            return .rejected("HTTP \(status)\(detail)")
        }
    }

    /// RFC 3986 unreserved characters: a Matrix room id's `!` and `:` are encoded, as the spec's examples show.
    static let unreserved = CharacterSet.alphanumerics.union(CharacterSet(charactersIn: "-._~"))

    static func retryAfter(_ headers: [AnyHashable: Any], _ json: JSONValue?) -> TimeInterval? {
        if let ms = json?["retry_after_ms"]?.intValue { return Double(ms) / 1000 }
        if case .number(let n)? = json?["retry_after"], let s = Double(n) { return s }
        if let s = json?["parameters"]?["retry_after"]?.intValue { return Double(s) }
        guard let value = header("Retry-After", headers) else { return nil }
        if let s = Double(value) { return max(0, s) }
        let f = DateFormatter()
        f.locale = Locale(identifier: "en_US_POSIX")
        f.dateFormat = "EEE, dd MMM yyyy HH:mm:ss zzz"
        return f.date(from: value).map { max(0, $0.timeIntervalSinceNow) }
    }

    static func header(_ name: String, _ headers: [AnyHashable: Any]) -> String? {
        headers.first { ($0.key as? String)?.caseInsensitiveCompare(name) == .orderedSame }?.value as? String
    }

    /// A short hint from the answer's body (never the request: it may carry secrets).
    static func detail(_ json: JSONValue?, _ body: Data) -> String {
        let text = json?["message"]?.stringValue ?? json?["error"]?.stringValue ?? json?["description"]?.stringValue
            ?? String(decoding: body.prefix(200), as: UTF8.self)
        let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines).replacingOccurrences(of: "\n", with: " ")
        return trimmed.isEmpty ? "" : ": " + String(trimmed.prefix(200))
    }
}
