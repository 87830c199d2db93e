import Alerts
import AllowanceAPI
import Foundation
import Store
import Yams

/// The relay's part of the config file: `relay`, `sinks`, `rules`, `templates`. Read with line numbers so each
/// mistake is reported with file, line, key and a fix; the daemon refuses to start on any of them.
public struct RelayConfig: Sendable {
    public var formatting = Formatting()
    /// In the file's order.
    public var sinks: [SinkConfig] = []
    public var rules: [Rule] = []
    public var templates: [RelayEvent.Kind: Template] = [:]
    public var titles: [RelayEvent.Kind: Template] = [:]
    /// A hub connection down this long raises `connection.lost`.
    public var connectionLostAfter: TimeInterval = 300
    /// What the first catch-up of a new database alerts of the family's history.
    public var history: HistoryMode = .none

    /// `relay.history`: a new relay starts from now (`none`), or tells the history as one digest per child, or all of it.
    public enum HistoryMode: String, Sendable, CaseIterable {
        case none, digest, all
    }

    public init() {}

    public var sinksByName: [String: SinkConfig] { Dictionary(uniqueKeysWithValues: sinks.map { ($0.name, $0) }) }

    /// The text and title templates for an alert of `kind` at `sink`: the sink's, else the file's, else built in.
    public func templates(for kind: RelayEvent.Kind, sink: SinkConfig) -> (title: Template, text: Template) {
        let text = sink.templates[kind] ?? templates[kind] ?? (try! Template(DefaultTemplates.text[kind]!))
        let title = sink.titles[kind] ?? titles[kind] ?? (try! Template(DefaultTemplates.title[kind]!))
        return (title, text)
    }

    /// Without rules every sink gets the alerts people want by default.
    /// An MQTT sink also gets every balance change: a dashboard shows the balance, whatever changed it.
    static func defaultRules(_ sinks: [SinkConfig]) -> [Rule] {
        var rules = [
            Rule(
                name: "default",
                events: [.transactionCreated, .outboxRejected, .outboxDead, .connectionLost, .deliveryDisabled, .syncConflict, .syncRejected],
                to: sinks.map(\.name))
        ]
        let mqtt = sinks.filter { $0.kind == .mqtt }.map(\.name)
        if !mqtt.isEmpty { rules.append(Rule(name: "default-balances", events: [.balanceUpdated], to: mqtt)) }
        return rules
    }

    public static func load(file: String?, environment: [String: String] = ProcessInfo.processInfo.environment) throws(ConfigErrors)
        -> RelayConfig
    {
        guard let file else { return RelayConfig() }
        return try parse(try ConfigFile.read(file), environment: environment)
    }

    /// The relay's part of `text` (tests, the fuzzer): parsed as `load` parses a file.
    public static func parse(_ text: String, file: String, environment: [String: String] = [:]) throws(ConfigErrors) -> RelayConfig {
        try parse(try ConfigFile.parse(text, path: file), environment: environment)
    }

    /// The relay's part of the parsed file. Each sink, template and rule is read on its own, so that every mistake
    /// in the file is reported at once.
    public static func parse(_ file: ConfigFile, environment: [String: String] = [:]) throws(ConfigErrors) -> RelayConfig {
        try parse(ConfigValues(file, environment))
    }

    /// The relay's part of the file's values (`values.file`; none: the defaults).
    public static func parse(_ values: ConfigValues) throws(ConfigErrors) -> RelayConfig {
        guard let file = values.file else { return RelayConfig() }
        let environment = values.environment
        var config = RelayConfig()
        var problems: [ConfigError] = []
        func collect(_ body: () throws(ConfigError) -> Void) {
            do { try body() } catch { problems.append(error) }
        }
        guard let root = file.root, let map = root.mapping else {
            if file.root != nil {
                throw ConfigErrors([ConfigError(file: file.path, line: 1, column: 1, key: "", "the file must be a mapping of sections", fix: "start with `server:`")])
            }
            return config
        }
        let top = Reader(node: root, key: "", file: file.path)

        // Single values, from the environment too (ALLOWANCE_RELAY_RELAY_CURRENCY ...); unknown keys are the
        // schema's to report (ConfigValues.unknownKeys).
        if let c = values.string("relay.currency") {
            if c.count == 3, c.allSatisfy(\.isLetter) {
                config.formatting.currency = c.uppercased()
            } else {
                problems.append(values.error("relay.currency", "'\(c)' is not a 3-letter ISO 4217 code", fix: "e.g. USD, EUR, GBP"))
            }
        }
        if let l = values.string("relay.locale") { config.formatting.locale = l }
        config.formatting.link = values.string("relay.link")
        if let link = config.formatting.link, URLComponents(string: link.replacingOccurrences(of: "{", with: "").replacingOccurrences(of: "}", with: ""))?.host == nil {
            problems.append(values.error("relay.link", "'\(link)' is not a URL template", fix: "e.g. https://allowance.example.org/children/{child_id}"))
        }
        config.formatting.iconURL = values.string("relay.icon_url")
        if let zone = values.string("relay.time_zone") {
            if let tz = TimeZone(identifier: zone) {
                config.formatting.timeZone = tz
            } else {
                problems.append(values.error("relay.time_zone", "'\(zone)' is not a time zone", fix: "an IANA name, e.g. Europe/Paris or America/New_York"))
            }
        }
        if let m = values.positive("relay.connection_lost_minutes", into: &problems) { config.connectionLostAfter = Double(m) * 60 }
        if let h = values.string("relay.history") {
            if let mode = HistoryMode(rawValue: h.lowercased()) {
                config.history = mode
            } else {
                problems.append(values.error("relay.history", "'\(h)' is not a history mode", fix: "none (start from now), digest or all"))
            }
        }

        if let sinksNode = map["sinks"] {
            let sinks = top.child(sinksNode, "sinks", at: map.keys.first { $0.string == "sinks" }?.mark)
            if let entries = sinksNode.mapping {
                for (k, v) in entries {
                    collect { () throws(ConfigError) in
                        guard let name = k.string, !name.isEmpty else { throw sinks.error("a sink name must be text", fix: "e.g. family-chat:") }
                        config.sinks.append(try parseSink(name, sinks.child(v, "sinks.\(name)", at: k.mark), environment, timeZone: config.formatting.timeZone))
                    }
                }
            } else if sinksNode.scalar?.string.isEmpty != true {
                problems.append(sinks.error("must map sink names to sinks", fix: "see config/reference.yaml"))
            }
        }
        let sinkNames = Set(config.sinks.map(\.name))

        if let tNode = map["templates"] {
            let t = top.child(tNode, "templates", at: map.keys.first { $0.string == "templates" }?.mark)
            (config.templates, config.titles) = parseTemplates(t, into: &problems)
        }

        if let rulesNode = map["rules"] {
            let rules = top.child(rulesNode, "rules", at: map.keys.first { $0.string == "rules" }?.mark)
            if let list = rulesNode.sequence {
                for (i, r) in list.enumerated() {
                    collect { () throws(ConfigError) in config.rules.append(try parseRule(rules.child(r, "rules[\(i)]", at: r.mark), index: i, sinks: sinkNames, timeZone: config.formatting.timeZone)) }
                }
            } else {
                problems.append(rules.error("must be a list of rules", fix: "start each rule with `- event:`"))
            }
        } else {
            config.rules = defaultRules(config.sinks)
        }
        guard problems.isEmpty else { throw ConfigErrors(problems.sorted { ($0.line, $0.column) < ($1.line, $1.column) }) }
        return config
    }

    /// `timeZone`: the family's (`relay.time_zone`), for quiet hours.
    private static func parseSink(_ name: String, _ r: Reader, _ env: [String: String], timeZone: TimeZone) throws(ConfigError) -> SinkConfig {
        // The compact form: `chat: discord://id/token`.
        if let text = r.node.string {
            guard let s = SinkConfig.compact(text, name: name) else {
                throw r.error("is not a sink URL I know", fix: "use discord://, slack://, ntfy(s)://, tgram://, gotify(s)://, json(s)://, matrix(s)://, or a mapping with type:", value: true)
            }
            return s
        }
        try r.allowOnly([
            "type", "url", "url_file", "token", "token_file", "secret", "secret_file", "room", "chat_id", "username",
            "rate_limit", "quiet_hours", "templates", "timeout_seconds", "retry_max_seconds", "max_age_hours", "concurrency",
            "link", "icon", "password", "password_file", "ca_file", "topic", "discovery_prefix", "protocol", "client_id", "from", "to", "require_tls",
            "channel", "edit",
        ])
        let envPrefix = "ALLOWANCE_RELAY_SINKS_" + name.uppercased().map { $0.isLetter || $0.isNumber ? String($0) : "_" }.joined() + "_"
        func secret(_ key: String) throws(ConfigError) -> Secret? {
            if let v = env[envPrefix + key.uppercased()], !v.isEmpty { return Secret(v) }
            if let v = try r.string(key) { return Secret(v) }
            if let f = try r.string(key + "_file") {
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
                throw r.error("type '\(typeText)' is not a sink type", fix: Suggest.fix(for: typeText, in: SinkConfig.Kind.allCases.map(\.rawValue)), at: "type")
            }
            sink = SinkConfig(name: name, kind: kind)
            if let u = urlSecret?.value {
                if let compact = SinkConfig.compact(u, name: name), compact.kind == kind {
                    sink = compact
                } else {
                    let schemes = kind == .mqtt ? ["mqtt", "mqtts"] : kind == .email ? ["smtp", "smtps"] : ["http", "https"]
                    guard let url = URL(string: u), let scheme = url.scheme?.lowercased(), schemes.contains(scheme), url.host() != nil else {
                        let example = kind == .mqtt ? "mqtt://broker.lan:1883 or mqtts://broker.lan:8883"
                            : kind == .email ? "smtp://mail.example.org:587 (STARTTLS) or smtps://mail.example.org:465"
                            : "https://hooks.example.org/allowance"
                        throw r.error("url is not a \(schemes.map { $0 + "://" }.joined(separator: " or ")) URL", fix: "e.g. \(example)", at: "url")
                    }
                    sink.url = url
                }
            }
        } else if let u = urlSecret?.value, let compact = SinkConfig.compact(u, name: name) {
            sink = compact
        } else {
            throw r.error("has no type", fix: "add type: (\(SinkConfig.Kind.allCases.map(\.rawValue).joined(separator: ", ")))")
        }
        if let t = try secret("token") { sink.token = t }
        if let p = try secret("password") { sink.password = p }
        if let f = try r.string("ca_file") {
            guard FileManager.default.isReadableFile(atPath: f) else { throw r.error("ca_file \(f) cannot be read", fix: "give a PEM file of CA certificates", at: "ca_file") }
            sink.caFile = f
        }
        if sink.kind == .mqtt { try parseMQTT(r, into: &sink) }
        if sink.kind == .email { try parseMail(r, into: &sink) }
        if let s = try secret("secret") {
            sink.secrets = s.value.split(whereSeparator: { $0 == " " || $0 == "\n" || $0 == "," }).map { Secret(String($0)) }
            for one in sink.secrets where !one.value.hasPrefix("whsec_") || Data(base64Encoded: String(one.value.dropFirst(6))) == nil {
                throw r.error("a webhook secret must be whsec_ followed by base64", fix: "generate one: echo whsec_$(head -c 32 /dev/urandom | base64)", at: "secret")
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
            let per: [String: Double] = ["s": 1, "sec": 1, "second": 1, "min": 60, "minute": 60, "h": 3600, "hour": 3600]
            guard parts.count == 2, let n = Int(parts[0]), n > 0, let seconds = per[String(parts[1])] else {
                throw r.error("rate_limit '\(limit)' is not COUNT/UNIT", fix: "e.g. 1/s, 30/min, 100/hour", at: "rate_limit")
            }
            sink.rateLimit = (n, seconds)
        }
        if let q = try r.string("quiet_hours") {
            guard let quiet = QuietHours(q, timeZone: timeZone) else { throw r.error("quiet_hours '\(q)' is not HH:MM-HH:MM", fix: "e.g. 22:00-07:00", at: "quiet_hours") }
            sink.quietHours = quiet
        }
        if let t = r.node.mapping?["templates"] { (sink.templates, sink.titles) = try parseTemplates(r.child(t, r.key + ".templates")) }
        if let t = try r.int("timeout_seconds") { sink.timeout = Double(t) }
        if let h = try r.int("max_age_hours") { sink.maxAge = Double(h) * 3600 }
        if let m = try r.int("retry_max_seconds") { sink.retryMax = Double(max(m, 1)) }
        if let c = try r.int("concurrency") {
            guard (1...64).contains(c) else { throw r.error("concurrency \(c) is out of range", fix: "1 to 64 sends at a time", at: "concurrency") }
            sink.concurrency = c
        }

        // What each type needs. Slack with a bot token talks to its Web API (default https://slack.com/api).
        if sink.kind == .slack, sink.token != nil {
            guard sink.channel != nil else { throw r.error("has a token but no channel", fix: "e.g. channel: C0123456789 (the channel's id), or drop token: for an incoming webhook") }
            if sink.url == nil { sink.url = URL(string: "https://slack.com/api") }
        }
        let needsURL: Set<SinkConfig.Kind> = [.webhook, .slack, .discord, .teams, .mattermost, .ntfy, .gotify, .matrix]
        if needsURL.contains(sink.kind), sink.url == nil {
            throw r.error("needs a url", fix: "set url: (or url_file:, or \(envPrefix)URL)")
        }
        if [.matrix, .telegram, .gotify].contains(sink.kind), sink.token == nil {
            throw r.error("needs a token", fix: "set token_file: (mode 600) or \(envPrefix)TOKEN")
        }
        if sink.kind == .matrix, sink.room == nil { throw r.error("needs a room", fix: "e.g. room: \"!abc:example.org\"") }
        if sink.kind == .telegram, sink.chatId == nil { throw r.error("needs a chat_id", fix: "e.g. chat_id: \"123456789\"") }
        if sink.kind == .telegram, sink.url == nil { sink.url = URL(string: "https://api.telegram.org") }
        if [.mqtt, .email].contains(sink.kind), sink.url == nil {
            throw r.error("needs a url", fix: sink.kind == .mqtt ? "e.g. url: mqtt://broker.lan:1883" : "e.g. url: smtp://mail.example.org:587")
        }
        if sink.password != nil, sink.username == nil { throw r.error("has a password but no username", fix: "add username:") }
        return sink
    }

    private static func parseMQTT(_ r: Reader, into sink: inout SinkConfig) throws(ConfigError) {
        if let t = try r.string("topic") {
            guard !t.isEmpty, !t.contains("#"), !t.contains("+"), !t.hasPrefix("/"), !t.hasSuffix("/") else {
                throw r.error("topic '\(t)' cannot be a base topic", fix: "e.g. topic: allowance (no wildcards, no leading or trailing /)", at: "topic")
            }
            sink.mqtt.topic = t
        }
        if let d = try r.string("discovery_prefix") { sink.mqtt.discoveryPrefix = ["", "off", "false", "none"].contains(d.lowercased()) ? nil : d }
        if let p = try r.string("protocol") {
            guard let v = MQTTSettings.MQTTProtocol(rawValue: p == "3" || p == "311" || p == "3.1" ? "3.1.1" : p) else {
                throw r.error("protocol '\(p)' is not an MQTT version", fix: "protocol: 5 (default) or protocol: 3.1.1", at: "protocol")
            }
            sink.mqtt.protocolVersion = v
        }
        sink.mqtt.clientId = try r.string("client_id")
    }

    private static func parseMail(_ r: Reader, into sink: inout SinkConfig) throws(ConfigError) {
        func address(_ a: String, _ key: String) throws(ConfigError) -> String {
            let parts = a.split(separator: "@")
            guard parts.count == 2, !parts[0].isEmpty, parts[1].contains("."), !a.contains(where: { $0 == " " || $0 == "<" || $0 == ">" || $0 == "\n" || $0 == "\r" })
            else { throw r.error("'\(a)' is not an e-mail address", fix: "e.g. parents@example.org", at: key) }
            return a
        }
        guard let from = try r.string("from") else { throw r.error("needs a from address", fix: "e.g. from: relay@example.org") }
        sink.mail.from = try address(from, "from")
        let to = try r.strings("to")
        guard !to.isEmpty else { throw r.error("needs a to address", fix: "e.g. to: [parent1@example.org, parent2@example.org]") }
        sink.mail.to = []
        for a in to { sink.mail.to.append(try address(a, "to")) }
        if let t = try r.bool("require_tls") { sink.mail.requireTLS = t }
    }

    private static func parseTemplates(_ r: Reader, into problems: inout [ConfigError]) -> ([RelayEvent.Kind: Template], [RelayEvent.Kind: Template]) {
        do {
            return try parseTemplates(r)
        } catch {
            problems.append(error)
            return ([:], [:])
        }
    }

    private static func parseTemplates(_ r: Reader) throws(ConfigError) -> ([RelayEvent.Kind: Template], [RelayEvent.Kind: Template]) {
        guard let entries = r.node.mapping else { throw r.error("must map alert kinds to templates", fix: "e.g. transaction.created: \"{child}: {amount}\"") }
        var texts: [RelayEvent.Kind: Template] = [:]
        var titles: [RelayEvent.Kind: Template] = [:]
        for (k, v) in entries {
            let key = k.string ?? ""
            let isTitle = key.hasSuffix(".title")
            let kindText = isTitle ? String(key.dropLast(6)) : key
            let child = r.child(v, "\(r.key).\(key)", at: k.mark)
            guard let kind = RelayEvent.Kind(rawValue: kindText) else {
                throw child.error("'\(kindText)' is not an alert kind", fix: Suggest.fix(for: kindText, in: RelayEvent.Kind.allCases.map(\.rawValue)) + " (add .title for the title)")
            }
            guard let source = v.string else { throw child.error("must be text", fix: "quote the template") }
            do {
                if isTitle { titles[kind] = try Template(source) } else { texts[kind] = try Template(source) }
            } catch {
                throw child.error("bad template: \(error.message)", fix: "see the placeholders in config/reference.yaml")
            }
        }
        return (texts, titles)
    }

    private static func parseRule(_ r: Reader, index: Int, sinks: Set<String>, timeZone: TimeZone) throws(ConfigError) -> Rule {
        try r.allowOnly([
            "name", "event", "child", "type", "amount_at_least", "amount_below", "description_contains", "below", "to", "urgency",
            "quiet_hours", "dedup_minutes", "digest", "summary",
        ])
        let name = try r.string("name") ?? "rule \(index + 1)"
        let eventTexts = try r.strings("event")
        var schedule: SummarySchedule?
        if let text = try r.string("summary") {
            guard let s = SummarySchedule(text) else {
                throw r.error("summary '\(text)' is not a schedule", fix: "e.g. summary: daily at 19:00, or summary: weekly on sunday at 18:00", at: "summary")
            }
            guard eventTexts.isEmpty else { throw r.error("has both event and summary", fix: "make the summary a rule of its own") }
            schedule = s
        } else if eventTexts.isEmpty {
            throw r.error("has no event", fix: "e.g. event: transaction.created (or a list), or summary: daily at 19:00")
        }
        var events = Set<RelayEvent.Kind>()
        for e in eventTexts {
            guard let kind = RelayEvent.Kind(rawValue: e), !RelayEvent.Kind.derivedOnly.contains(kind) else {
                throw r.error(
                    "event '\(e)' is not an event kind",
                    fix: Suggest.fix(for: e, in: RelayEvent.Kind.allCases.filter { !RelayEvent.Kind.derivedOnly.contains($0) }.map(\.rawValue)), at: "event")
            }
            events.insert(kind)
        }
        let to = try r.strings("to")
        guard !to.isEmpty else { throw r.error("has no `to`", fix: "name the sinks, e.g. to: [family-chat]") }
        for s in to where !sinks.contains(s) {
            let near = Suggest.closest(to: s, in: sinks).map { "did you mean \($0)? Or " } ?? ""
            throw r.error("sends to '\(s)', which is not a sink", fix: "\(near)define it under sinks: (known: \(sinks.sorted().joined(separator: ", ")))", at: "to")
        }
        var rule = Rule(name: name, events: events, to: to)
        rule.summary = schedule
        rule.children = Set(try r.strings("child").map { $0.lowercased() })
        if let t = try r.string("type") {
            guard let type = TransactionType(rawValue: t.prefix(1).uppercased() + t.dropFirst().lowercased()) else {
                throw r.error("type '\(t)' is neither credit nor debit", fix: "type: credit or type: debit", at: "type")
            }
            rule.type = type
        }
        rule.amountAtLeast = try r.money("amount_at_least")
        rule.amountBelow = try r.money("amount_below")
        rule.descriptionContains = try r.string("description_contains")
        rule.below = try r.money("below")
        if events.contains(.balanceLow), rule.below == nil {
            throw r.error("watches balance.low without a threshold", fix: "add below: 5.00")
        }
        if let u = try r.string("urgency") {
            guard let urgency = PlannedDelivery.Urgency(rawValue: u) else {
                throw r.error("urgency '\(u)' is not low, normal or critical", fix: "urgency: critical bypasses quiet hours", at: "urgency")
            }
            rule.urgency = urgency
        }
        if let q = try r.string("quiet_hours") {
            guard let quiet = QuietHours(q, timeZone: timeZone) else { throw r.error("quiet_hours '\(q)' is not HH:MM-HH:MM", fix: "e.g. 22:00-07:00", at: "quiet_hours") }
            rule.quietHours = quiet
        }
        if let m = try r.int("dedup_minutes") { rule.dedupWindow = Double(m) * 60 }
        if let d = try r.bool("digest") { rule.digest = d }
        return rule
    }
}

/// A YAML node with the key path that leads to it, for typed reads and errors that point at the line.
struct Reader {
    let node: Node
    let key: String
    let file: String
    /// Where the key that names this node is written (a mapping's own mark is at its first entry).
    var at: Mark?

    func child(_ node: Node, _ key: String, at mark: Mark? = nil) -> Reader { Reader(node: node, key: key, file: file, at: mark) }

    /// A mistake at this node, or at its key `sub` (at the value's place with `value`: a compact sink's URL).
    func error(_ message: String, fix: String, at sub: String? = nil, value: Bool = false) -> ConfigError {
        let map = node.mapping
        let place = sub.flatMap { s in map?.first { $0.key.string == s }?.value.mark ?? map?.keys.first { $0.string == s }?.mark }
            ?? (value ? node.mark : nil) ?? at ?? node.mark
        return ConfigError(file: file, line: place?.line ?? 0, column: place?.column ?? 0, key: sub.map { "\(key).\($0)" } ?? key, message, fix: fix)
    }

    func allowOnly(_ keys: Set<String>) throws(ConfigError) {
        guard let map = node.mapping else { throw error("must be a mapping", fix: "indent its keys under it") }
        for (k, v) in map {
            let name = k.string ?? ""
            if !keys.contains(name) {
                let mark = k.mark ?? v.mark
                throw ConfigError(
                    file: file, line: mark?.line ?? 0, column: mark?.column ?? 0, key: "\(key).\(name)", "is not a known key",
                    fix: Suggest.fix(for: name, in: keys))
            }
        }
    }

    func string(_ k: String) throws(ConfigError) -> String? {
        guard let v = node.mapping?[k] else { return nil }
        guard let s = v.scalar?.string else { throw error("must be a single value", fix: "write it on one line", at: k) }
        return s
    }

    /// A value or a list of values.
    func strings(_ k: String) throws(ConfigError) -> [String] {
        guard let v = node.mapping?[k] else { return [] }
        if let s = v.scalar?.string { return [s] }
        guard let list = v.sequence else { throw error("must be a value or a list", fix: "e.g. [a, b]", at: k) }
        var out: [String] = []
        for item in list {
            guard let s = item.scalar?.string else { throw error("must be a list of values", fix: "e.g. [a, b]", at: k) }
            out.append(s)
        }
        return out
    }

    func int(_ k: String) throws(ConfigError) -> Int? {
        guard let s = try string(k) else { return nil }
        guard let n = Int(s), n > 0 else { throw error("'\(s)' is not a whole number above 0", fix: "e.g. 5", at: k) }
        return n
    }

    func bool(_ k: String) throws(ConfigError) -> Bool? {
        guard let s = try string(k) else { return nil }
        switch s.lowercased() {
        case "true", "yes", "on": return true
        case "false", "no", "off": return false
        default: throw error("'\(s)' is not true or false", fix: "write true or false", at: k)
        }
    }

    func money(_ k: String) throws(ConfigError) -> Decimal? {
        guard let s = try string(k) else { return nil }
        // Plain decimals with at most two places, as `transaction add` takes them: no exponent, no third decimal.
        let digits = s.split(separator: ".", omittingEmptySubsequences: false)
        guard digits.count <= 2, digits.allSatisfy({ !$0.isEmpty && $0.allSatisfy(\.isASCII) && $0.allSatisfy(\.isNumber) }),
            let d = Decimal(string: s, locale: Locale(identifier: "en_US_POSIX"))
        else { throw error("'\(s)' is not an amount", fix: "write it like 5.00 (digits, at most two decimals)", at: k) }
        guard digits.count < 2 || digits[1].count <= 2 else {
            throw error("'\(s)' has more than two decimals", fix: "money is in cents: write e.g. \(digits[0]).\(digits[1].prefix(2))", at: k)
        }
        return d
    }
}
