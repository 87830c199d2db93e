import Alerts
import AllowanceAPI
import Foundation

/// One destination, as the config file describes it.
public struct SinkConfig: Sendable {
    /// What the environment variables of sink `name` start with: `ALLOWANCE_RELAY_SINKS_FAMILY_CHAT_` for
    /// `family-chat` (then URL, TOKEN, SECRET, PASSWORD).
    public static func environmentPrefix(_ name: String) -> String {
        "ALLOWANCE_RELAY_SINKS_" + name.uppercased().map { $0.isLetter || $0.isNumber ? String($0) : "_" }.joined()
            + "_"
    }

    public enum Kind: String, Sendable, CaseIterable {
        case webhook, slack, discord, teams, mattermost, ntfy, gotify, matrix, telegram, desktop, mqtt, email

        /// A program reads what it gets (the generic webhook, MQTT), not a person.
        public var isMachine: Bool { self == .webhook || self == .mqtt }
    }

    public var name: String
    public var kind: Kind
    /// The endpoint (webhook, Slack, Discord, Teams, Mattermost, ntfy topic URL) or the server's base URL (Matrix,
    /// Telegram, Gotify). Often a secret itself (Slack and Discord URLs carry their token): never logged.
    public var url: URL?
    /// Matrix access token, Telegram bot token, Gotify app token, ntfy access token.
    public var token: Secret?
    /// Standard Webhooks secrets (`whsec_...`): the first signs, all are sent during a rotation.
    public var secrets: [Secret] = []
    /// MQTT broker or SMTP server password (with `username`).
    public var password: Secret?
    /// A CA bundle to check the server's certificate with, instead of the system's (MQTT, SMTP).
    public var caFile: String?
    public var mqtt = MQTTSettings()
    public var mail = MailSettings()
    /// Desktop: the icon of every popup, a file path or an icon theme's name (default: the installed
    /// `allowance-relay` icon).
    public var icon: String?
    /// This sink's own link template (over `relay.link`).
    public var link: String?
    public var room: String?
    public var chatId: String?
    /// Slack with a bot token (`chat.postMessage`, `chat.update`): the channel's id or name (an id lets a summary
    /// carry its chart: `files.completeUploadExternal` takes no name).
    public var channel: String?
    /// A child's balance alert edits the message the last one posted instead of posting again, where the destination
    /// allows it (Telegram, Slack with a bot token, Matrix, Discord, ntfy) and that message is recent (`editWindow`).
    public var edit = true
    public var username: String?
    /// At most `count` sends per `seconds`. Slack, Discord and Telegram ask for about one a second per channel.
    public var rateLimit: (count: Int, seconds: Double)?
    public var quietHours: QuietHours?
    /// Per-kind templates for this sink (over the global ones, over the built-in ones).
    public var templates: [RelayEvent.Kind: Template] = [:]
    public var titles: [RelayEvent.Kind: Template] = [:]
    public var timeout: Double = 15
    /// The longest wait between two tries of a failing destination: once it is back, alerts flow again within
    /// this long (the back-off doubles from 2 s up to it).
    public var retryMax: TimeInterval = 600
    /// A delivery still failing after this long is given up (dead letter).
    public var maxAge: TimeInterval = 86400
    /// Sends under way at once, on kept-alive connections. A chat sink sends one alert per child at a time, so
    /// that a chat shows a child's alerts in the order they happened; the generic webhook does not wait (its
    /// receiver orders by `data.at`).
    public var concurrency = 4

    /// A balance message older than this is not edited (scrolled out of sight, or past what the service allows):
    /// the next change posts a new one.
    public static let editWindow: TimeInterval = 24 * 3600

    /// Whether this destination can edit a message already posted.
    public var canEdit: Bool {
        switch kind {
        case .telegram, .matrix, .discord, .ntfy: true
        case .slack: token != nil  // the incoming-webhook form cannot
        default: false
        }
    }

    /// Whether alerts about one child must arrive in order (a chat shows them as they arrive; MQTT keeps the last
    /// state it was given).
    public var ordersByChild: Bool { kind != .webhook }

    /// A machine reads this sink (it books each transaction): catch-ups are not folded into digests for it.
    public var isMachine: Bool { kind.isMachine }

    public init(name: String, kind: Kind) {
        self.name = name
        self.kind = kind
        if [.slack, .discord, .telegram].contains(kind) { rateLimit = (1, 1) }
    }

    /// The most characters a message may have at this destination.
    public var maxLength: Int {
        switch kind {
        case .discord: 2000
        case .telegram: 4096
        case .ntfy: 4096
        case .slack, .mattermost: 16000
        case .teams: 20000
        case .gotify, .matrix, .webhook, .desktop, .mqtt, .email: 30000
        }
    }

    /// Reads the compact URL forms people know from Apprise: `discord://id/token`, `slack://T/B/X`,
    /// `ntfy://host/topic`, `tgram://bottoken/chat_id`, `gotify://host/token`, `json://` / `jsons://host/path`
    /// (a generic webhook over http / https), `matrixs://token@host/!room:server`. Nil: not a compact form.
    public static func compact(_ text: String, name: String) -> SinkConfig? {
        // A bot token has a colon in it, which URL parsing would take for a port.
        if text.lowercased().hasPrefix("tgram://") {
            let parts = text.dropFirst(8).split(separator: "/").map(String.init)
            guard parts.count == 2 else { return nil }
            var s = SinkConfig(name: name, kind: .telegram)
            s.url = URL(string: "https://api.telegram.org")
            s.token = Secret(parts[0])
            s.chatId = parts[1]
            return s
        }
        guard let c = URLComponents(string: text), let scheme = c.scheme?.lowercased(), let host = c.host, !host.isEmpty
        else { return nil }
        let path = c.path.split(separator: "/").map(String.init)
        // `ntfy://` is plain http, `ntfys://` https (likewise gotify, json, matrix).
        let origin = "\(scheme.hasSuffix("s") ? "https" : "http")://\(host)\(c.port.map { ":\($0)" } ?? "")"
        switch scheme {
        case "discord" where path.count == 1:
            var s = SinkConfig(name: name, kind: .discord)
            s.url = URL(string: "https://discord.com/api/webhooks/\(host)/\(path[0])")
            return s
        case "slack" where path.count == 2:
            var s = SinkConfig(name: name, kind: .slack)
            s.url = URL(string: "https://hooks.slack.com/services/\(host)/\(path[0])/\(path[1])")
            return s
        case "ntfy", "ntfys":
            var s = SinkConfig(name: name, kind: .ntfy)
            s.url = URL(string: origin + c.path)
            return s
        case "gotify", "gotifys":
            guard let token = path.last else { return nil }
            var s = SinkConfig(name: name, kind: .gotify)
            let prefix = path.dropLast().map { "/" + $0 }.joined()
            s.url = URL(string: origin + prefix)
            s.token = Secret(token)
            return s
        case "json", "jsons":
            var s = SinkConfig(name: name, kind: .webhook)
            s.url = URL(string: origin + c.path)
            return s
        case "mqtt", "mqtts":
            // The broker, and the base topic if a path is given: `mqtt://broker.lan/allowance`.
            var s = SinkConfig(name: name, kind: .mqtt)
            s.url = URL(string: "\(scheme)://\(host)\(c.port.map { ":\($0)" } ?? "")")
            if !path.isEmpty { s.mqtt.topic = path.joined(separator: "/") }
            return s
        case "matrix", "matrixs":
            guard let user = c.user, let room = path.first else { return nil }
            var s = SinkConfig(name: name, kind: .matrix)
            s.url = URL(string: origin)
            s.token = Secret(user)
            s.room = room
            return s
        default:
            return nil
        }
    }
}

/// What an MQTT sink publishes where (`topic`, Home Assistant discovery).
public struct MQTTSettings: Sendable, Equatable {
    /// Every topic starts with this: `allowance/status`, `allowance/child/ID/state`, `allowance/alert`.
    public var topic = "allowance"
    /// Home Assistant's discovery prefix; nil: no discovery messages.
    public var discoveryPrefix: String? = "homeassistant"
    public var protocolVersion: MQTTProtocol = .v5
    /// Unique per broker; by default `allowance-relay-HOST-SINK`.
    public var clientId: String?

    public enum MQTTProtocol: String, Sendable, CaseIterable {
        case v5 = "5"
        case v311 = "3.1.1"
    }

    public init() {}
}

/// Who an e-mail sink writes from and to, and how it reaches its server.
public struct MailSettings: Sendable, Equatable {
    public var from: String = ""
    public var to: [String] = []
    /// `smtp://` upgrades with STARTTLS and refuses to go on without it, unless this is false (a local relay on
    /// loopback). `smtps://` is TLS from the first byte.
    public var requireTLS = true

    public init() {}
}

/// A daily quiet period in the family's time zone (`relay.time_zone`, else the system's), e.g. 22:00-07:00 (may
/// cross midnight).
public struct QuietHours: Sendable, Equatable {
    public let start: Int  // minutes after midnight
    public let end: Int
    public let timeZone: TimeZone

    public init?(_ text: String, timeZone: TimeZone = .current) {
        let halves = text.split(separator: "-").map { $0.trimmingCharacters(in: .whitespaces) }
        func minutes(_ s: String) -> Int? {
            let hm = s.split(separator: ":")
            guard hm.count == 2, let h = Int(hm[0]), let m = Int(hm[1]), (0..<24).contains(h), (0..<60).contains(m)
            else { return nil }
            return h * 60 + m
        }
        guard halves.count == 2, let a = minutes(halves[0]), let b = minutes(halves[1]), a != b else { return nil }
        start = a
        end = b
        self.timeZone = timeZone
    }

    private func minuteOfDay(_ date: Date) -> Int {
        var cal = Calendar(identifier: .gregorian)
        cal.timeZone = timeZone
        let c = cal.dateComponents([.hour, .minute], from: date)
        return (c.hour ?? 0) * 60 + (c.minute ?? 0)
    }

    public func contains(_ date: Date) -> Bool {
        let m = minuteOfDay(date)
        return start < end ? (m >= start && m < end) : (m >= start || m < end)
    }

    /// When the quiet period that `date` falls in ends.
    public func end(after date: Date) -> Date {
        let m = minuteOfDay(date)
        var wait = end - m
        if wait <= 0 { wait += 24 * 60 }
        let seconds = Calendar(identifier: .gregorian).component(.second, from: date)
        return date.addingTimeInterval(Double(wait * 60 - seconds))
    }
}
