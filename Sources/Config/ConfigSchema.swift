import Alerts
import AllowanceAPI
import Foundation
import SignalRProtocol
import Yams

/// One key of the configuration's single-valued sections: its type, default, allowed values and what it does. The
/// schema is the one place of each: the typed reads take their defaults and allowed values from it, unknown keys and
/// misspellings are found against it, every key can be set from the environment by its name (`server.url` ←
/// `ALLOWANCE_RELAY_SERVER_URL`), and `config/reference.yaml` is checked against it in a test. (`sinks`, `rules`
/// and `templates` are entries of their own, read by `AlertSettings`.)
public struct ConfigSetting: Sendable {
    public let key: String
    public let type: String
    public let defaultValue: String?
    public let help: String
    /// The values a choice or a list may take (nil: any of its type).
    public let allowed: [String]?

    init(key: String, type: String, defaultValue: String?, help: String, allowed: [String]? = nil) {
        self.key = key
        self.type = type
        self.defaultValue = defaultValue
        self.help = help
        self.allowed = allowed
    }

    /// One of an enum's cases, which are the allowed values (`full|normal`).
    static func choice<T: RawRepresentable & CaseIterable>(_ key: String, _ fallback: T, help: String) -> ConfigSetting
    where T.RawValue == String {
        oneOf(key, T.allCases.map(\.rawValue), fallback.rawValue, help: help)
    }

    static func oneOf(_ key: String, _ allowed: [String], _ fallback: String, help: String) -> ConfigSetting {
        ConfigSetting(
            key: key, type: allowed.joined(separator: "|"), defaultValue: fallback, help: help, allowed: allowed)
    }

    /// A list of some of `allowed`, all of them by default.
    static func list(_ key: String, _ allowed: [String], help: String) -> ConfigSetting {
        let all = "[" + allowed.joined(separator: ", ") + "]"
        return ConfigSetting(key: key, type: all, defaultValue: all, help: help, allowed: allowed)
    }

    public var environmentVariable: String { ConfigSchema.environmentVariable(key) }
    /// A list (`[a, b]` in the file, `a,b` in the environment).
    public var isList: Bool { type.hasPrefix("[") }
    /// Never printed back, in messages or `config check`.
    public var isSecret: Bool { key.hasSuffix(".token") || key.hasSuffix(".password") }
}

public enum ConfigSchema {
    public static let settings: [ConfigSetting] = [
        .init(key: "server.url", type: "url", defaultValue: nil, help: "the backend's base URL (http:// or https://)"),
        .init(
            key: "server.hub_path", type: "path", defaultValue: "/hubs/family", help: "the hub's path on the backend"),
        .init(
            key: "server.token", type: "secret", defaultValue: nil,
            help: "a bearer token (better: token_file or the environment)"),
        .init(
            key: "server.token_file", type: "file", defaultValue: nil,
            help: "a file (mode 600) holding the token, read afresh at each connect"),
        .init(key: "server.email", type: "text", defaultValue: nil, help: "sign in with this e-mail address"),
        .init(key: "server.password", type: "secret", defaultValue: nil, help: "its password (better: password_file)"),
        .init(
            key: "server.password_file", type: "file", defaultValue: nil, help: "a file (mode 600) holding the password"
        ),
        .init(
            key: "server.access_token_in_query", type: "boolean", defaultValue: "false",
            help: "send the token in the WebSocket URL"),
        .init(
            key: "server.skip_negotiation", type: "boolean", defaultValue: "false",
            help: "connect to the WebSocket without negotiating"),
        .choice(
            "server.hub_protocol", HubProtocolKind.json,
            help: "the hub protocol spoken (MessagePack: not over Server-Sent Events)"),
        .list(
            "server.transports", TransportKind.allCases.map(\.configName),
            help: "the transports the relay may use, in its order of preference; only those the server offers are tried"
        ),
        .init(
            key: "server.ca_file", type: "file", defaultValue: nil,
            help: "PEM file of CA certificates trusted for the server"),
        .init(
            key: "server.insecure_tls", type: "boolean", defaultValue: "false",
            help: "skip TLS certificate checks (tests only)"),
        .init(
            key: "server.keep_alive_interval", type: "duration", defaultValue: "15s",
            help: "ping the hub after this long without sending (half the server's ClientTimeoutInterval at most)"),
        .init(
            key: "server.server_timeout", type: "duration", defaultValue: "30s",
            help: "end the link after this long without a message (twice the server's KeepAliveInterval at least)"),
        .init(
            key: "server.max_response_bytes", type: "bytes", defaultValue: String(APIClient.defaultMaxResponseBytes),
            help: "the longest REST answer read"),
        .init(key: "store.path", type: "file", defaultValue: nil, help: "the SQLite database"),
        .init(
            key: "store.url", type: "postgres://USER@HOST:PORT/DB", defaultValue: nil,
            help:
                "a PostgreSQL database shared by several relays (replicas) instead of the SQLite file; no password in it"
        ),
        .init(
            key: "store.password", type: "secret", defaultValue: nil,
            help: "the database password (better: password_file or the environment)"),
        .init(
            key: "store.password_file", type: "file", defaultValue: nil,
            help: "a file (mode 600) holding the database password"),
        .init(
            key: "store.replica_name", type: "text", defaultValue: nil,
            help: "this relay's name among the replicas (default: host name and process id)"),
        .choice("store.durability", RelaySettings.Durability.full, help: "what a commit waits for"),
        .init(
            key: "store.keep_transactions_days", type: "days", defaultValue: nil,
            help: "prune synced transactions older than this"),
        .init(key: "outbox.limit", type: "count", defaultValue: "100", help: "most writes waiting for the server"),
        .init(
            key: "outbox.max_attempts", type: "count", defaultValue: "10", help: "attempts before a write is given up"),
        .init(
            key: "outbox.max_age_days", type: "days", defaultValue: "7",
            help: "age at which a waiting write is given up"),
        .oneOf(
            "log.level", ["trace", "debug", "info", "notice", "warning", "error", "critical"], "info",
            help: "the least level logged"),
        .choice("log.format", RelaySettings.LogFormat.text, help: "one line of text, or one JSON object, per entry"),
        .init(
            key: "status.listen", type: "[host:]port", defaultValue: nil,
            help: "where the family page (/), /healthz and /metrics are served"),
        .init(
            key: "status.token", type: "string", defaultValue: nil,
            help: "the token the family page and /metrics ask for (better: status.token_file)"),
        .init(
            key: "status.token_file", type: "file", defaultValue: nil,
            help: "a file holding that token (mode 600); required when status.listen is not loopback"),
        .init(
            key: "status.unhealthy_after", type: "duration", defaultValue: "15m",
            help: "how long a sink may fail before /healthz says unhealthy (one that dead-letters is at once)"),
        .init(
            key: "telemetry.otlp_endpoint", type: "url", defaultValue: nil,
            help:
                "an OpenTelemetry collector's OTLP/HTTP base URL (http://host:4318): traces from each hub event to each delivery; unset: no tracing"
        ),
        .init(
            key: "telemetry.service_name", type: "text", defaultValue: "allowance-relay",
            help: "the service.name the traces carry"),
        .init(key: "relay.currency", type: "ISO 4217 code", defaultValue: "USD", help: "the family's currency"),
        .init(
            key: "relay.locale", type: "locale", defaultValue: "en_US",
            help: "how amounts and dates are written in alerts"),
        .init(
            key: "relay.link", type: "url template", defaultValue: nil,
            help: "where a click on an alert leads, also {link}; with {child_id}, {child}, {transaction_id}, {kind}"),
        .init(
            key: "relay.icon_url", type: "url", defaultValue: nil,
            help: "an icon (PNG) for push services that show one (ntfy, Gotify)"),
        .init(
            key: "relay.time_zone", type: "IANA time zone", defaultValue: nil,
            help: "the family's time zone, for quiet hours, summaries and \"mute today\" (default: the system's)"),
        .init(
            key: "relay.connection_lost_minutes", type: "minutes", defaultValue: "5",
            help: "raise connection.lost after the hub is away this long"),
        .choice(
            "relay.history", AlertSettings.HistoryMode.none,
            help:
                "what the first catch-up of a new database alerts of the family's history: nothing, one digest per child, or every transaction"
        ),
    ]

    /// The top-level sections, in the reference file's order.
    public static let sections = [
        "server", "store", "outbox", "log", "status", "telemetry", "relay", "sinks", "rules", "templates",
    ]
    /// Sections whose entries the relay reads itself (names of their own, lists).
    static let entrySections: Set<String> = ["sinks", "rules", "templates"]

    public static func environmentVariable(_ key: String) -> String {
        "ALLOWANCE_RELAY_" + key.uppercased().replacingOccurrences(of: ".", with: "_")
    }

    static let byKey = Dictionary(uniqueKeysWithValues: settings.map { ($0.key, $0) })

    /// The default of `key` as written in the schema ("" for a key without one).
    public static func defaultValue(of key: String) -> String { byKey[key]?.defaultValue ?? "" }
}

/// The configuration's single values: the file's, with `ALLOWANCE_RELAY_*` environment variables on top, and the
/// place of each for messages. A key left unset reads as the schema's default.
public struct ConfigValues: Sendable {
    public let file: ConfigFile?
    public let environment: [String: String]
    /// The file's single values by key (`server.url`); a list's items as one text, as the environment gives them.
    private let fileValues: [String: String]

    public init(_ file: ConfigFile?, _ environment: [String: String]) {
        self.file = file
        self.environment = environment
        var values: [String: String] = [:]
        for (section, node) in file?.root?.mapping ?? [:] {
            guard let name = section.string, !ConfigSchema.entrySections.contains(name), let entries = node.mapping
            else { continue }
            for (k, v) in entries {
                guard let key = k.string.map({ "\(name).\($0)" }) else { continue }
                let items = ConfigSchema.byKey[key]?.isList == true ? v.sequence?.compactMap(\.scalar?.string) : nil
                if let text = v.scalar?.string ?? items?.joined(separator: ",") { values[key] = text }
            }
        }
        fileValues = values
    }

    /// `ALLOWANCE_RELAY_*` variables that name no setting: a typo there would be ignored, so it is a mistake as an
    /// unknown key of the file is. A sink's variables (`ALLOWANCE_RELAY_SINKS_<NAME>_...`) are the relay's to check.
    func unknownVariables() -> [ConfigError] {
        let known = ConfigSchema.settings.map { ConfigSchema.environmentVariable($0.key) }
        return environment.keys.sorted().filter {
            $0.hasPrefix("ALLOWANCE_RELAY_") && !$0.hasPrefix("ALLOWANCE_RELAY_SINKS_") && !known.contains($0)
        }.map { variable in
            ConfigError(
                file: "environment", key: variable, "names no setting",
                fix: Suggest.closest(to: variable, in: known).map { "did you mean \($0)?" }
                    ?? "a variable is ALLOWANCE_RELAY_ and a key of config/reference.yaml in capitals (server.url: ALLOWANCE_RELAY_SERVER_URL)"
            )
        }
    }

    /// The value of `key` (`server.url`) as written, from the environment or else the file; nil when neither sets it.
    public func string(_ key: String) -> String? {
        environment[ConfigSchema.environmentVariable(key)] ?? fileValues[key]
    }

    /// The value of `key`, or its default.
    public func value(_ key: String) -> String? {
        string(key) ?? ConfigSchema.byKey[key]?.defaultValue
    }

    /// The value of a file's key (`store.path`, `server.token_file` ...) as a path: one written relative in the file
    /// is taken from the file's folder, not from wherever the command runs (one from the environment is the
    /// environment's, relative to the current folder as a shell's would be).
    public func path(_ key: String) -> String? {
        guard let text = string(key), !text.isEmpty else { return nil }
        if environment[ConfigSchema.environmentVariable(key)] != nil { return text }
        return ConfigSource.resolve(text, besides: file?.path)
    }

    /// A mistake in the value of `key`, placed where the value came from: the environment variable, or the file's line.
    public func error(_ key: String, _ message: String, fix: String) -> ConfigError {
        let variable = ConfigSchema.environmentVariable(key)
        if environment[variable] != nil { return ConfigError(file: "environment", key: variable, message, fix: fix) }
        let path = key.split(separator: ".").map(String.init)
        if let file, let place = file.place(path) {
            // The value's own column when it is on the key's line.
            let value = file.node(path)?.mark
            let column = value.map { $0.line == place.line ? $0.column : place.column } ?? place.column
            return ConfigError(file: file.path, line: place.line, column: column, key: key, message, fix: fix)
        }
        return ConfigError(file: file?.path ?? "configuration", key: key, message, fix: fix)
    }

    /// Keys and sections of the file the schema does not know, and values that are not single ones: each with a
    /// "did you mean" when a known one is close.
    public func unknownKeys() -> [ConfigError] {
        let variables = unknownVariables()
        guard let file, let root = file.root else { return variables }
        guard let map = root.mapping else {
            return variables + [
                ConfigError(
                    file: file.path, line: 1, column: 1, key: "", "the file must be a mapping of sections",
                    fix: "start with `server:`")
            ]
        }
        var problems: [ConfigError] = variables
        for (k, v) in map {
            let name = k.string ?? ""
            let at = (k.mark?.line ?? 0, k.mark?.column ?? 0)
            guard ConfigSchema.sections.contains(name) else {
                problems.append(
                    ConfigError(
                        file: file.path, line: at.0, column: at.1, key: name, "is not a known section",
                        fix: Suggest.fix(for: name, in: ConfigSchema.sections)))
                continue
            }
            guard !ConfigSchema.entrySections.contains(name) else { continue }
            guard let entries = v.mapping else {
                if v.scalar?.string.isEmpty != true {
                    problems.append(
                        ConfigError(
                            file: file.path, line: at.0, column: at.1, key: name, "must be a mapping of keys",
                            fix: "indent its keys under it"))
                }
                continue
            }
            let known = ConfigSchema.settings.filter { $0.key.hasPrefix(name + ".") }.map {
                String($0.key.dropFirst(name.count + 1))
            }
            for (ek, ev) in entries {
                let key = ek.string ?? ""
                let place = (ek.mark?.line ?? 0, ek.mark?.column ?? 0)
                if !known.contains(key) {
                    problems.append(
                        ConfigError(
                            file: file.path, line: place.0, column: place.1, key: "\(name).\(key)",
                            "is not a known key",
                            fix: Suggest.fix(for: key, in: known, prefix: name + ".")))
                } else if ev.scalar == nil
                    && !(ConfigSchema.byKey["\(name).\(key)"]?.isList == true
                        && ev.sequence?.allSatisfy({ $0.scalar != nil }) == true)
                {
                    problems.append(
                        ConfigError(
                            file: file.path, line: place.0, column: place.1, key: "\(name).\(key)",
                            "must be a single value, not a list or a mapping",
                            fix:
                                "write one value after the colon, e.g. \(name).\(key): \(ConfigSchema.byKey["\(name).\(key)"]?.defaultValue ?? "...")"
                        ))
                }
            }
        }
        return problems
    }

    // MARK: - Typed reads, unset keys at the schema's default; a bad value is added to `problems` and the default
    // returned

    public func flag(_ key: String, into problems: inout [ConfigError]) -> Bool {
        let fallback = ConfigSchema.byKey[key]?.defaultValue.flatMap(ConfigBool.parse) ?? false
        guard let text = string(key) else { return fallback }
        guard let value = ConfigBool.parse(text) else {
            problems.append(error(key, "'\(text)' is not true or false", fix: "write true or false"))
            return fallback
        }
        return value
    }

    /// A whole number above 0; nil when unset and the schema has no default.
    public func positive(_ key: String, into problems: inout [ConfigError]) -> Int? {
        let fallback = ConfigSchema.byKey[key]?.defaultValue.flatMap { Int($0) }
        guard let text = string(key) else { return fallback }
        guard let n = Int(text), n > 0 else {
            problems.append(
                error(
                    key, "'\(text)' is not a whole number above 0",
                    fix: "e.g. \(ConfigSchema.byKey[key]?.defaultValue ?? "5")"))
            return fallback
        }
        return n
    }

    /// A whole number above 0 that the schema gives a default.
    public func count(_ key: String, into problems: inout [ConfigError]) -> Int {
        positive(key, into: &problems) ?? 0
    }

    /// One of the schema's allowed values for `key`.
    public func oneOf(_ key: String, into problems: inout [ConfigError]) -> String {
        let fallback = ConfigSchema.byKey[key]?.defaultValue ?? ""
        let allowed = ConfigSchema.byKey[key]?.allowed ?? []
        guard let text = string(key) else { return fallback }
        guard allowed.contains(text) else {
            problems.append(
                error(
                    key, "'\(text)' is not one of \(allowed.joined(separator: ", "))",
                    fix: Suggest.fix(for: text, in: allowed)))
            return fallback
        }
        return text
    }

    /// A list of the schema's allowed values for `key` (`[a, b]` in the file, `a,b` in the environment), in the order
    /// given, each once; nil after a mistake.
    public func list(_ key: String, into problems: inout [ConfigError]) -> [String]? {
        let allowed = ConfigSchema.byKey[key]?.allowed ?? []
        guard let text = value(key) else { return nil }
        var names: [String] = []
        let items = text.split(separator: ",").map { $0.trimmingCharacters(in: CharacterSet(charactersIn: " []")) }
        for item in items where !item.isEmpty {
            guard allowed.contains(item) else {
                problems.append(
                    error(
                        key, "'\(item)' is not one of \(allowed.joined(separator: ", "))",
                        fix: Suggest.fix(for: item, in: allowed)))
                return nil
            }
            if !names.contains(item) { names.append(item) }
        }
        guard !names.isEmpty else {
            problems.append(error(key, "names none", fix: "list at least one of \(allowed.joined(separator: ", "))"))
            return nil
        }
        return names
    }

    /// One of an enum's cases (the schema's choice for `key`).
    public func choice<T: RawRepresentable & CaseIterable>(
        _ key: String, _: T.Type, into problems: inout [ConfigError]
    ) -> T
    where T.RawValue == String {
        let value = oneOf(key, into: &problems)
        guard let choice = T(rawValue: value) ?? T.allCases.first else {
            preconditionFailure("\(key): an enum without cases")
        }
        return choice
    }
}

/// The one vocabulary of booleans, in the file and in the environment alike (an empty value is false: an
/// environment variable set to nothing).
public enum ConfigBool {
    public static func parse(_ text: String) -> Bool? {
        switch text.lowercased() {
        case "true", "yes", "on", "1": true
        case "false", "no", "off", "0", "": false
        default: nil
        }
    }
}
