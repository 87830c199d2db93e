import Alerts
import AllowanceAPI
import Foundation
import Yams

/// The `sinks:` section: one sink's keys by kind, with every mistake reported at its line.
extension AlertSettings {
    /// `timeZone`: the family's (`relay.time_zone`), for quiet hours.
    static func parseSink(
        _ name: String, _ r: ConfigSection, _ env: [String: String], timeZone: TimeZone
    ) throws(ConfigError) -> SinkConfig {
        // The compact form: `chat: discord://id/token`.
        if let text = r.node.string {
            guard let s = SinkConfig.compact(text, name: name) else {
                throw r.error(
                    "is not a sink URL I know",
                    fix:
                        "use discord://, slack://, ntfy(s)://, tgram://, gotify(s)://, json(s)://, matrix(s)://, or a mapping with type:",
                    value: true)
            }
            return s
        }
        try r.allowOnly([
            "type", "url", "url_file", "token", "token_file", "secret", "secret_file", "room", "chat_id", "username",
            "rate_limit", "quiet_hours", "templates", "timeout_seconds", "retry_max_seconds", "max_age_hours",
            "concurrency",
            "link", "icon", "password", "password_file", "ca_file", "topic", "discovery_prefix", "protocol",
            "client_id", "from", "to", "require_tls",
            "channel", "edit",
        ])
        let envPrefix = SinkConfig.environmentPrefix(name)
        func secret(_ key: String) throws(ConfigError) -> Secret? {
            if let v = env[envPrefix + key.uppercased()], !v.isEmpty { return Secret(v) }
            if let v = try r.string(key) { return Secret(v) }
            if let f = try r.path(key + "_file") {
                do { return try Secret.read(file: f, what: "\(key) file of sink \(name)") } catch {
                    throw r.error(error.problem, fix: error.fix ?? "check the file", at: key + "_file")
                }
            }
            return nil
        }
        let urlSecret = try secret("url")
        var sink: SinkConfig
        if let typeText = try r.string("type") {
            guard let kind = SinkConfig.Kind(rawValue: typeText) else {
                throw r.error(
                    "type '\(typeText)' is not a sink type",
                    fix: Suggest.fix(for: typeText, in: SinkConfig.Kind.allCases.map(\.rawValue)), at: "type")
            }
            sink = SinkConfig(name: name, kind: kind)
            if let u = urlSecret?.value {
                if let compact = SinkConfig.compact(u, name: name), compact.kind == kind {
                    sink = compact
                } else {
                    let schemes =
                        kind == .mqtt ? ["mqtt", "mqtts"] : kind == .email ? ["smtp", "smtps"] : ["http", "https"]
                    guard let url = URL(string: u), let scheme = url.scheme?.lowercased(), schemes.contains(scheme),
                        url.host() != nil
                    else {
                        let example =
                            kind == .mqtt
                            ? "mqtt://broker.lan:1883 or mqtts://broker.lan:8883"
                            : kind == .email
                                ? "smtp://mail.example.org:587 (STARTTLS) or smtps://mail.example.org:465"
                                : "https://hooks.example.org/allowance"
                        // As server.url's fix, but the URL may hold a token (Discord's, Slack's): the fix shows the
                        // scheme and the host, never the path or the query.
                        let fix =
                            URLFix.suggest(u, schemes: schemes).flatMap(URL.init(string:)).flatMap { near -> String? in
                                guard let scheme = near.scheme, let host = near.host() else { return nil }
                                let rest = near.path.isEmpty && near.query == nil ? "" : "/..."
                                return "did you mean \(scheme)://\(host)\(near.port.map { ":\($0)" } ?? "")\(rest)?"
                            } ?? "e.g. \(example)"
                        throw r.error(
                            "url is not a \(schemes.map { $0 + "://" }.joined(separator: " or ")) URL", fix: fix,
                            at: "url")
                    }
                    sink.url = url
                }
            }
        } else if let u = urlSecret?.value, let compact = SinkConfig.compact(u, name: name) {
            sink = compact
        } else {
            throw r.error(
                "has no type", fix: "add type: (\(SinkConfig.Kind.allCases.map(\.rawValue).joined(separator: ", ")))")
        }
        if let t = try secret("token") { sink.token = t }
        if let p = try secret("password") { sink.password = p }
        if let f = try r.path("ca_file") {
            guard FileManager.default.isReadableFile(atPath: f) else {
                throw r.error("ca_file \(f) cannot be read", fix: "give a PEM file of CA certificates", at: "ca_file")
            }
            sink.caFile = f
        }
        if sink.kind == .mqtt { try parseMQTT(r, into: &sink) }
        if sink.kind == .email { try parseMail(r, into: &sink) }
        if let s = try secret("secret") {
            sink.secrets = s.value.split(whereSeparator: { $0 == " " || $0 == "\n" || $0 == "," }).map {
                Secret(String($0))
            }
            for one in sink.secrets
            where !one.value.hasPrefix("whsec_") || Data(base64Encoded: String(one.value.dropFirst(6))) == nil {
                throw r.error(
                    "a webhook secret must be whsec_ followed by base64",
                    fix: "generate one: echo whsec_$(head -c 32 /dev/urandom | base64)", at: "secret")
            }
        }
        sink.channel = try r.string("channel")
        if let e = try r.bool("edit") { sink.edit = e }
        sink.room = try r.string("room") ?? sink.room
        sink.chatId = try r.string("chat_id") ?? sink.chatId
        sink.username = try r.string("username")
        sink.link = try r.string("link")
        sink.icon = try r.string("icon")
        if let limit = try r.string("rate_limit") {
            let parts = limit.split(separator: "/")
            let per: [String: Double] = [
                "s": 1, "sec": 1, "second": 1, "min": 60, "minute": 60, "h": 3600, "hour": 3600,
            ]
            guard parts.count == 2, let n = Int(parts[0]), n > 0, let seconds = per[String(parts[1])] else {
                throw r.error(
                    "rate_limit '\(limit)' is not COUNT/UNIT", fix: "e.g. 1/s, 30/min, 100/hour", at: "rate_limit")
            }
            sink.rateLimit = (n, seconds)
        }
        if let q = try r.string("quiet_hours") {
            guard let quiet = QuietHours(q, timeZone: timeZone) else {
                throw r.error("quiet_hours '\(q)' is not HH:MM-HH:MM", fix: "e.g. 22:00-07:00", at: "quiet_hours")
            }
            sink.quietHours = quiet
        }
        if let t = r.node.mapping?["templates"] {
            (sink.templates, sink.titles) = try parseTemplates(r.child(t, r.key + ".templates"))
        }
        if let t = try r.int("timeout_seconds") { sink.timeout = Double(t) }
        if let h = try r.int("max_age_hours") { sink.maxAge = Double(h) * 3600 }
        if let m = try r.int("retry_max_seconds") { sink.retryMax = Double(max(m, 1)) }
        if let c = try r.int("concurrency") {
            guard (1...64).contains(c) else {
                throw r.error("concurrency \(c) is out of range", fix: "1 to 64 sends at a time", at: "concurrency")
            }
            sink.concurrency = c
        }

        // What each type needs. Slack with a bot token talks to its Web API (default https://slack.com/api).
        if sink.kind == .slack, sink.token != nil {
            guard sink.channel != nil else {
                throw r.error(
                    "has a token but no channel",
                    fix: "e.g. channel: C0123456789 (the channel's id), or drop token: for an incoming webhook")
            }
            if sink.url == nil { sink.url = URL(string: "https://slack.com/api") }
        }
        let needsURL: Set<SinkConfig.Kind> = [.webhook, .slack, .discord, .teams, .mattermost, .ntfy, .gotify, .matrix]
        if needsURL.contains(sink.kind), sink.url == nil {
            throw r.error("needs a url", fix: "set url: (or url_file:, or \(envPrefix)URL)")
        }
        if [.matrix, .telegram, .gotify].contains(sink.kind), sink.token == nil {
            throw r.error("needs a token", fix: "set token_file: (mode 600) or \(envPrefix)TOKEN")
        }
        if sink.kind == .matrix, sink.room == nil {
            throw r.error("needs a room", fix: "e.g. room: \"!abc:example.org\"")
        }
        if sink.kind == .telegram, sink.chatId == nil {
            throw r.error("needs a chat_id", fix: "e.g. chat_id: \"123456789\"")
        }
        if sink.kind == .telegram, sink.url == nil { sink.url = URL(string: "https://api.telegram.org") }
        if [.mqtt, .email].contains(sink.kind), sink.url == nil {
            throw r.error(
                "needs a url",
                fix: sink.kind == .mqtt ? "e.g. url: mqtt://broker.lan:1883" : "e.g. url: smtp://mail.example.org:587")
        }
        if sink.password != nil, sink.username == nil {
            throw r.error("has a password but no username", fix: "add username:")
        }
        return sink
    }

    static func parseMQTT(_ r: ConfigSection, into sink: inout SinkConfig) throws(ConfigError) {
        if let t = try r.string("topic") {
            guard !t.isEmpty, !t.contains("#"), !t.contains("+"), !t.hasPrefix("/"), !t.hasSuffix("/") else {
                throw r.error(
                    "topic '\(t)' cannot be a base topic",
                    fix: "e.g. topic: allowance (no wildcards, no leading or trailing /)", at: "topic")
            }
            sink.mqtt.topic = t
        }
        if let d = try r.string("discovery_prefix") {
            sink.mqtt.discoveryPrefix = ["", "off", "false", "none"].contains(d.lowercased()) ? nil : d
        }
        if let p = try r.string("protocol") {
            guard let v = MQTTSettings.MQTTProtocol(rawValue: p == "3" || p == "311" || p == "3.1" ? "3.1.1" : p) else {
                throw r.error(
                    "protocol '\(p)' is not an MQTT version", fix: "protocol: 5 (default) or protocol: 3.1.1",
                    at: "protocol")
            }
            sink.mqtt.protocolVersion = v
        }
        sink.mqtt.clientId = try r.string("client_id")
    }

    static func parseMail(_ r: ConfigSection, into sink: inout SinkConfig) throws(ConfigError) {
        func address(_ a: String, _ key: String) throws(ConfigError) -> String {
            let parts = a.split(separator: "@")
            guard parts.count == 2, !parts[0].isEmpty, parts[1].contains("."),
                !a.contains(where: { $0 == " " || $0 == "<" || $0 == ">" || $0 == "\n" || $0 == "\r" })
            else { throw r.error("'\(a)' is not an e-mail address", fix: "e.g. parents@example.org", at: key) }
            return a
        }
        guard let from = try r.string("from") else {
            throw r.error("needs a from address", fix: "e.g. from: relay@example.org")
        }
        sink.mail.from = try address(from, "from")
        let to = try r.strings("to")
        guard !to.isEmpty else {
            throw r.error("needs a to address", fix: "e.g. to: [parent1@example.org, parent2@example.org]")
        }
        sink.mail.to = []
        for a in to { sink.mail.to.append(try address(a, "to")) }
        if let t = try r.bool("require_tls") { sink.mail.requireTLS = t }
    }
}
