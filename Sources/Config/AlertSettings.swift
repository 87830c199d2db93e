import Alerts
import AllowanceAPI
import Foundation
import Yams

/// The relay's part of the config file: `relay`, `sinks`, `rules`, `templates`. Read with line numbers so each
/// mistake is reported with file, line, key and a fix; the daemon refuses to start on any of them.
public struct AlertSettings: Sendable {
    public var formatting = Formatting()
    /// In the file's order.
    public var sinks: [SinkConfig] = []
    public var rules: [Rule] = []
    /// The file has no `rules:`: every sink gets the default alerts (`defaultRules`).
    public internal(set) var defaultRouting = false
    public var templates: [RelayEvent.Kind: Template] = [:]
    public var titles: [RelayEvent.Kind: Template] = [:]
    /// A hub connection down this long raises `connection.lost`.
    public var connectionLostAfter: TimeInterval
    /// What the first catch-up of a new database alerts of the family's history.
    public var history: HistoryMode

    /// `relay.history`: a new relay starts from now (`none`), or tells the history as one digest per child, or all of it.
    public enum HistoryMode: String, Sendable, CaseIterable {
        case none, digest, all
    }

    /// The schema's defaults, no sinks.
    public init() {
        var problems: [ConfigError] = []
        self.init(ConfigValues(nil, [:]), into: &problems)
    }

    /// The `relay` section's values (`values`, the schema's defaults where unset): the environment's too, with or
    /// without a file.
    private init(_ values: ConfigValues, into problems: inout [ConfigError]) {
        let currency = values.value("relay.currency") ?? ""
        if currency.count == 3, currency.allSatisfy(\.isLetter) {
            formatting.currency = currency.uppercased()
        } else {
            problems.append(
                values.error(
                    "relay.currency", "'\(currency)' is not a 3-letter ISO 4217 code", fix: "e.g. USD, EUR, GBP"))
        }
        formatting.locale = values.value("relay.locale") ?? ""
        formatting.link = values.string("relay.link")
        if let link = formatting.link,
            URLComponents(string: link.replacingOccurrences(of: "{", with: "").replacingOccurrences(of: "}", with: ""))?
                .host == nil
        {
            problems.append(
                values.error(
                    "relay.link", "'\(link)' is not a URL template",
                    fix: "e.g. https://allowance.example.org/children/{child_id}"))
        }
        formatting.iconURL = values.string("relay.icon_url")
        if let zone = values.string("relay.time_zone") {
            if let tz = TimeZone(identifier: zone) {
                formatting.timeZone = tz
            } else {
                problems.append(
                    values.error(
                        "relay.time_zone", "'\(zone)' is not a time zone",
                        fix: "an IANA name, e.g. Europe/Paris or America/New_York"))
            }
        }
        connectionLostAfter = Double(values.count("relay.connection_lost_minutes", into: &problems)) * 60
        history = values.choice("relay.history", HistoryMode.self, into: &problems)
    }

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
                events: [
                    .transactionCreated, .outboxRejected, .outboxDead, .connectionLost, .deliveryDisabled,
                    .syncConflict, .syncRejected,
                ],
                to: sinks.map(\.name))
        ]
        let mqtt = sinks.filter { $0.kind == .mqtt }.map(\.name)
        if !mqtt.isEmpty { rules.append(Rule(name: "default-balances", events: [.balanceUpdated], to: mqtt)) }
        return rules
    }

    public static func load(
        file: String?, environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws(ConfigErrors)
        -> AlertSettings
    {
        try parse(ConfigValues(try file.map { path throws(ConfigErrors) in try ConfigFile.read(path) }, environment))
    }

    /// The relay's part of `text` (tests, the fuzzer): parsed as `load` parses a file.
    public static func parse(
        _ text: String, file: String, environment: [String: String] = [:]
    ) throws(ConfigErrors) -> AlertSettings {
        try parse(try ConfigFile.parse(text, path: file), environment: environment)
    }

    /// The relay's part of the parsed file. Each sink, template and rule is read on its own, so that every mistake
    /// in the file is reported at once.
    public static func parse(
        _ file: ConfigFile, environment: [String: String] = [:]
    ) throws(ConfigErrors) -> AlertSettings {
        try parse(ConfigValues(file, environment))
    }

    /// The relay's part of the values: the `relay` section (the environment's too) and the file's sinks, rules and
    /// templates.
    public static func parse(_ values: ConfigValues) throws(ConfigErrors) -> AlertSettings {
        let environment = values.environment
        var problems: [ConfigError] = []
        var config = AlertSettings(values, into: &problems)
        func collect(_ body: () throws(ConfigError) -> Void) {
            do { try body() } catch { problems.append(error) }
        }
        guard let file = values.file, let root = file.root, let map = root.mapping else {
            if let file = values.file, file.root != nil {
                problems.append(
                    ConfigError(
                        file: file.path, line: 1, column: 1, key: "", "the file must be a mapping of sections",
                        fix: "start with `server:`"))
            }
            guard problems.isEmpty else { throw ConfigErrors(merging: problems) }
            return config
        }
        let top = ConfigSection(node: root, key: "", file: file.path)

        if let sinksNode = map["sinks"] {
            let sinks = top.child(sinksNode, "sinks", at: map.keys.first { $0.string == "sinks" }?.mark)
            if let entries = sinksNode.mapping {
                for (k, v) in entries {
                    collect { () throws(ConfigError) in
                        guard let name = k.string, !name.isEmpty else {
                            throw sinks.error("a sink name must be text", fix: "e.g. family-chat:")
                        }
                        config.sinks.append(
                            try parseSink(
                                name, sinks.child(v, "sinks.\(name)", at: k.mark), environment,
                                timeZone: config.formatting.timeZone))
                    }
                }
            } else if sinksNode.scalar?.string.isEmpty != true {
                problems.append(sinks.error("must map sink names to sinks", fix: "see config/reference.yaml"))
            }
        }
        // Every sink the file names, read or not: a rule that sends to a sink whose own keys are wrong is not a
        // second mistake (the sink's is reported, once, at its line).
        let sinkNames = Set(map["sinks"]?.mapping?.keys.compactMap(\.string) ?? []).union(config.sinks.map(\.name))
        // A sink's value from the environment (ALLOWANCE_RELAY_SINKS_<NAME>_URL ...) for a sink the file does not
        // have would be silently ignored: it is a mistake.
        let prefixes = sinkNames.map(SinkConfig.environmentPrefix)
        for variable in environment.keys.sorted() where variable.hasPrefix("ALLOWANCE_RELAY_SINKS_") {
            guard !prefixes.contains(where: { variable.hasPrefix($0) }) else { continue }
            problems.append(
                ConfigError(
                    file: "environment", key: variable, "names no sink of the configuration",
                    fix: sinkNames.isEmpty
                        ? "define the sink under sinks: in the file"
                        : "the sinks are \(sinkNames.sorted().joined(separator: ", ")) (e.g. \(SinkConfig.environmentPrefix(sinkNames.sorted()[0]))URL)"
                ))
        }

        if let tNode = map["templates"] {
            let t = top.child(tNode, "templates", at: map.keys.first { $0.string == "templates" }?.mark)
            (config.templates, config.titles) = parseTemplates(t, into: &problems)
        }

        if let rulesNode = map["rules"] {
            let rules = top.child(rulesNode, "rules", at: map.keys.first { $0.string == "rules" }?.mark)
            if let list = rulesNode.sequence {
                for (i, r) in list.enumerated() {
                    collect { () throws(ConfigError) in
                        config.rules.append(
                            try parseRule(
                                rules.child(r, "rules[\(i)]", at: r.mark), index: i, sinks: sinkNames,
                                timeZone: config.formatting.timeZone))
                    }
                }
            } else {
                problems.append(rules.error("must be a list of rules", fix: "start each rule with `- event:`"))
            }
        } else {
            config.rules = defaultRules(config.sinks)
            config.defaultRouting = true
        }
        guard problems.isEmpty else { throw ConfigErrors(merging: problems) }
        return config
    }

    private static func parseTemplates(
        _ r: ConfigSection, into problems: inout [ConfigError]
    ) -> ([RelayEvent.Kind: Template], [RelayEvent.Kind: Template]) {
        do {
            return try parseTemplates(r)
        } catch {
            problems.append(error)
            return ([:], [:])
        }
    }

    static func parseTemplates(
        _ r: ConfigSection
    ) throws(ConfigError) -> ([RelayEvent.Kind: Template], [RelayEvent.Kind: Template]) {
        guard let entries = r.node.mapping else {
            throw r.error("must map alert kinds to templates", fix: "e.g. transaction.created: \"{child}: {amount}\"")
        }
        var texts: [RelayEvent.Kind: Template] = [:]
        var titles: [RelayEvent.Kind: Template] = [:]
        for (k, v) in entries {
            let key = k.string ?? ""
            let isTitle = key.hasSuffix(".title")
            let kindText = isTitle ? String(key.dropLast(6)) : key
            let child = r.child(v, "\(r.key).\(key)", at: k.mark)
            guard let kind = RelayEvent.Kind(rawValue: kindText) else {
                throw child.error(
                    "'\(kindText)' is not an alert kind",
                    fix: Suggest.fix(for: kindText, in: RelayEvent.Kind.allCases.map(\.rawValue))
                        + " (add .title for the title)")
            }
            guard let source = v.string else { throw child.error("must be text", fix: "quote the template") }
            do {
                if isTitle { titles[kind] = try Template(source) } else { texts[kind] = try Template(source) }
            } catch {
                throw child.error(
                    "bad template: \(error.message)", fix: "see the placeholders in config/reference.yaml")
            }
        }
        return (texts, titles)
    }

    private static func parseRule(
        _ r: ConfigSection, index: Int, sinks: Set<String>, timeZone: TimeZone
    ) throws(ConfigError) -> Rule {
        try r.allowOnly([
            "name", "event", "child", "type", "amount_at_least", "amount_below", "description_contains", "below", "to",
            "urgency",
            "quiet_hours", "dedup_minutes", "digest", "summary",
        ])
        let name = try r.string("name") ?? "rule \(index + 1)"
        let eventTexts = try r.strings("event")
        var schedule: SummarySchedule?
        if let text = try r.string("summary") {
            guard let s = SummarySchedule(text) else {
                throw r.error(
                    "summary '\(text)' is not a schedule",
                    fix: "e.g. summary: daily at 19:00, or summary: weekly on sunday at 18:00", at: "summary")
            }
            guard eventTexts.isEmpty else {
                throw r.error("has both event and summary", fix: "make the summary a rule of its own")
            }
            schedule = s
        } else if eventTexts.isEmpty {
            throw r.error(
                "has no event", fix: "e.g. event: transaction.created (or a list), or summary: daily at 19:00")
        }
        var events = Set<RelayEvent.Kind>()
        for e in eventTexts {
            guard let kind = RelayEvent.Kind(rawValue: e), !RelayEvent.Kind.derivedOnly.contains(kind) else {
                throw r.error(
                    "event '\(e)' is not an event kind",
                    fix: Suggest.fix(
                        for: e,
                        in: RelayEvent.Kind.allCases.filter { !RelayEvent.Kind.derivedOnly.contains($0) }.map(
                            \.rawValue)), at: "event")
            }
            events.insert(kind)
        }
        let to = try r.strings("to")
        guard !to.isEmpty else { throw r.error("has no `to`", fix: "name the sinks, e.g. to: [family-chat]") }
        for s in to where !sinks.contains(s) {
            let near = Suggest.closest(to: s, in: sinks).map { "did you mean \($0)? Or " } ?? ""
            throw r.error(
                "sends to '\(s)', which is not a sink",
                fix: "\(near)define it under sinks: (known: \(sinks.sorted().joined(separator: ", ")))", at: "to")
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
                throw r.error(
                    "urgency '\(u)' is not low, normal or critical", fix: "urgency: critical bypasses quiet hours",
                    at: "urgency")
            }
            rule.urgency = urgency
        }
        if let q = try r.string("quiet_hours") {
            guard let quiet = QuietHours(q, timeZone: timeZone) else {
                throw r.error("quiet_hours '\(q)' is not HH:MM-HH:MM", fix: "e.g. 22:00-07:00", at: "quiet_hours")
            }
            rule.quietHours = quiet
        }
        if let m = try r.int("dedup_minutes") { rule.dedupWindow = Double(m) * 60 }
        if let d = try r.bool("digest") { rule.digest = d }
        return rule
    }
}
