import AllowanceAPI
import Foundation
import HTTPTransport
import PostgresTransport
import SignalRProtocol

/// Where the relay connects and keeps its state. Read from a YAML file, with `ALLOWANCE_RELAY_*`
/// environment variables on top (e.g. `server.url` ← `ALLOWANCE_RELAY_SERVER_URL`).
public struct RelaySettings: Sendable {
    /// The backend's base URL, e.g. `https://allowance.example.org`.
    public var serverURL: URL
    /// The hub's path on the backend.
    public var hubPath: String
    /// The bearer token, from `server.token` / `ALLOWANCE_RELAY_SERVER_TOKEN`, or read from `tokenFile`.
    public var token: Secret?
    public var tokenFile: String?
    /// Or a login: `server.email` with `server.password` / `server.password_file`.
    public var email: String?
    public var password: Secret?
    public var passwordFile: String?
    public var accessTokenInQuery: Bool
    public var skipNegotiation: Bool
    /// `server.hub_protocol`: JSON (the default) or MessagePack.
    public var hubProtocol: HubProtocolKind = .json
    /// `server.transports`: the transports the relay may use, in its order of preference.
    public var transports: [TransportKind] = TransportKind.allCases
    public var caFile: String?
    /// Skip TLS checks. For tests against self-signed servers only: logged loudly at every connect.
    public var insecureTLS: Bool
    /// `server.keep_alive_interval`: a ping after this long without sending (the official clients' 15 s).
    public var keepAliveInterval: TimeInterval = 15
    /// `server.server_timeout`: the link ends after this long without a message from the server (their 30 s).
    public var serverTimeout: TimeInterval = 30
    /// The longest REST answer read (`server.max_response_bytes`, default 8 MiB): a page is some kilobytes.
    public var maxResponseBytes = APIClient.defaultMaxResponseBytes
    public var storePath: String { local.storePath }
    public var storeDurability: Durability
    /// Retention and outbox limits: also what the offline CLI commands read.
    public var local: LocalSettings
    public var logLevel: String
    public var logFormat: LogFormat
    /// `status.listen`: where `/healthz` and `/metrics` are served (nil: not served).
    public var statusListen: (host: String, port: Int)?
    /// `status.token`, or the file that holds it (`status.token_file`): what the family page and /metrics ask for
    /// (Bearer, or Basic with it as the password). Nil: no login, which only a loopback address allows.
    public var statusToken: Secret?
    public var statusTokenFile: String?

    /// The status token, read from its file when it is in one.
    public func readStatusToken() throws(APIError) -> Secret? {
        if let statusToken { return statusToken }
        return try statusTokenFile.map { (path) throws(APIError) in try Secret.read(file: path, what: "token file") }
    }

    /// Whether `host` reaches only this machine.
    public static func isLoopback(_ host: String) -> Bool {
        ["localhost", "::1", "[::1]"].contains(host.lowercased()) || host.hasPrefix("127.")
    }
    /// `status.unhealthy_after`: how long a sink may fail (its retries may still get through) before `/healthz` says
    /// unhealthy. A sink that dead-letters is unhealthy at once.
    public var unhealthyAfter: TimeInterval = 0
    /// `telemetry.otlp_endpoint`: the collector's OTLP/HTTP base URL (traces go to `/v1/traces` under it, unless it
    /// names that path itself); nil: no tracing.
    public var otlpEndpoint: URL?
    /// `telemetry.service_name`: the traces' `service.name`.
    public var serviceName = ""

    public enum LogFormat: String, Sendable, CaseIterable { case text, json }
    /// What a commit waits for: `full` (a committed row survives power loss) or `normal` (faster; the last writes
    /// may be lost in a power cut).
    public enum Durability: String, Sendable, CaseIterable { case full, normal }

    public var hubURL: URL {
        var path = hubPath
        if !path.hasPrefix("/") { path = "/" + path }
        return URL(string: serverURL.absoluteString.trimmingSuffix("/") + path) ?? serverURL
    }

    /// Loads settings: `file` (if given; it must exist), then the environment on top.
    public static func load(
        file: String?, environment: [String: String] = ProcessInfo.processInfo.environment
    )
        async throws(ConfigErrors) -> RelaySettings
    {
        try await load(file == nil ? nil : try ConfigFile.read(file!), environment: environment)
    }

    /// The settings from the parsed file with the environment on top; every mistake at once.
    public static func load(
        _ file: ConfigFile?, environment: [String: String] = ProcessInfo.processInfo.environment
    )
        async throws(ConfigErrors) -> RelaySettings
    {
        try await load(ConfigValues(file, environment))
    }

    /// The settings from the file's values with the environment on top; every mistake at once.
    public static func load(_ values: ConfigValues) async throws(ConfigErrors) -> RelaySettings {
        let file = values.file
        var problems = values.unknownKeys()

        var url = URL(string: "http://127.0.0.1")!
        if let urlText = values.string("server.url"), !urlText.isEmpty {
            if let parsed = URL(string: urlText), let scheme = parsed.scheme?.lowercased(),
                ["http", "https"].contains(scheme), parsed.host() != nil
            {
                url = parsed
            } else {
                problems.append(
                    values.error(
                        "server.url", "'\(Self.shown(urlText))' is not an http:// or https:// URL with a host",
                        fix: URLFix.suggest(urlText).map { "did you mean \($0)?" }
                            ?? "e.g. https://allowance.example.org"))
            }
        } else {
            problems.append(
                ConfigError(
                    file: file?.path ?? "configuration", key: "server.url", "is not set",
                    fix: "set server.url in the config file or ALLOWANCE_RELAY_SERVER_URL (e.g. http://127.0.0.1:5000)")
            )
        }
        let token = values.string("server.token").flatMap { $0.isEmpty ? nil : Secret($0) }
        let tokenFile = values.path("server.token_file")
        let email = values.string("server.email").flatMap { $0.isEmpty ? nil : $0 }
        let password = values.string("server.password").flatMap { $0.isEmpty ? nil : Secret($0) }
        let passwordFile = values.path("server.password_file")
        if email != nil, token != nil || tokenFile != nil {
            problems.append(
                values.error(
                    "server.email", "is set together with a token",
                    fix: "keep one way to sign in: remove server.token* or server.email"))
        }
        if email != nil, password == nil, passwordFile == nil {
            problems.append(
                values.error(
                    "server.email", "is set without a password",
                    fix: "set server.password_file (mode 600) or ALLOWANCE_RELAY_SERVER_PASSWORD"))
        }
        let logFormat = values.choice("log.format", LogFormat.self, into: &problems)
        let durability = values.choice("store.durability", Durability.self, into: &problems)
        let level = values.oneOf("log.level", into: &problems)
        var statusListen: (String, Int)?
        if let listen = values.string("status.listen"), !listen.isEmpty {
            // "9464" or "127.0.0.1:9464" (the host defaults to loopback: the endpoint has no authentication).
            let parts = listen.split(separator: ":", omittingEmptySubsequences: false)
            let host = parts.count == 2 ? String(parts[0]) : "127.0.0.1"
            if parts.count <= 2, let port = Int(parts.last!), (1...65535).contains(port), !host.isEmpty {
                statusListen = (host, port)
            } else {
                problems.append(
                    values.error("status.listen", "'\(listen)' is not PORT or HOST:PORT", fix: "e.g. 127.0.0.1:9464"))
            }
        }
        let statusToken = values.string("status.token").flatMap { $0.isEmpty ? nil : Secret($0) }
        let statusTokenFile = values.path("status.token_file")
        if let (host, port) = statusListen, !Self.isLoopback(host), statusToken == nil, statusTokenFile == nil {
            problems.append(
                values.error(
                    "status.listen",
                    "'\(host):\(port)' is reachable from other machines, and the family page shows the family's money",
                    fix: "set status.token_file (mode 600), or listen on 127.0.0.1"))
        }
        let times = durations(
            ["status.unhealthy_after", "server.keep_alive_interval", "server.server_timeout"], values, into: &problems)
        if let interval = times["server.keep_alive_interval"], let timeout = times["server.server_timeout"],
            timeout <= interval
        {
            problems.append(
                values.error(
                    "server.server_timeout", "is not longer than server.keep_alive_interval",
                    fix: "keep it at least twice the server's keep-alive (ASP.NET Core: 15s, so 30s)"))
        }
        var otlpEndpoint: URL?
        if let text = values.string("telemetry.otlp_endpoint"), !text.isEmpty {
            if let url = URL(string: text), ["http", "https"].contains(url.scheme?.lowercased() ?? ""),
                url.host()?.isEmpty == false
            {
                otlpEndpoint = url
            } else {
                problems.append(
                    values.error(
                        "telemetry.otlp_endpoint",
                        "'\(Self.shown(text))' is not an http:// or https:// URL with a host",
                        fix: "e.g. http://127.0.0.1:4318 (an OpenTelemetry collector's OTLP/HTTP port)"))
            }
        }
        var maxResponseBytes = APIClient.defaultMaxResponseBytes
        if let text = values.string("server.max_response_bytes") {
            if let n = Int(text), n >= 65536 {
                maxResponseBytes = n
            } else {
                problems.append(
                    values.error(
                        "server.max_response_bytes", "'\(text)' is not a number of bytes of at least 65536",
                        fix: "e.g. 8388608 (8 MiB)"))
            }
        }
        let local = LocalSettings(values, values.environment, into: &problems)
        let hubProtocol = values.choice("server.hub_protocol", HubProtocolKind.self, into: &problems)
        let transports =
            values.list("server.transports", into: &problems)?
            .compactMap(TransportKind.init(configName:)) ?? TransportKind.allCases
        if hubProtocol == .messagepack, transports == [.serverSentEvents] {
            problems.append(
                values.error(
                    "server.transports", "allows Server-Sent Events only, which cannot carry MessagePack",
                    fix: "add websockets or long_polling, or set server.hub_protocol: json"))
        }
        let skipNegotiation = values.flag("server.skip_negotiation", into: &problems)
        if skipNegotiation, !transports.contains(.webSockets) {
            problems.append(
                values.error(
                    "server.skip_negotiation", "is set, but server.transports leaves WebSockets out",
                    fix: "skipping negotiation is for WebSockets only: remove one of them"))
        }
        var settings = RelaySettings(
            serverURL: url,
            hubPath: values.value("server.hub_path") ?? "",
            token: token,
            tokenFile: tokenFile,
            email: email,
            password: password,
            passwordFile: passwordFile,
            accessTokenInQuery: values.flag("server.access_token_in_query", into: &problems),
            skipNegotiation: skipNegotiation,
            caFile: values.path("server.ca_file"),
            insecureTLS: values.flag("server.insecure_tls", into: &problems),
            maxResponseBytes: maxResponseBytes,
            storeDurability: durability,
            local: local,
            logLevel: level,
            logFormat: logFormat,
            statusListen: statusListen)
        (settings.statusToken, settings.statusTokenFile) = (statusToken, statusTokenFile)
        settings.hubProtocol = hubProtocol
        settings.transports = transports
        settings.otlpEndpoint = otlpEndpoint
        settings.unhealthyAfter = times["status.unhealthy_after"] ?? 0
        settings.keepAliveInterval = times["server.keep_alive_interval"] ?? settings.keepAliveInterval
        settings.serverTimeout = times["server.server_timeout"] ?? settings.serverTimeout
        settings.serviceName =
            values.string("telemetry.service_name").flatMap { $0.isEmpty ? nil : $0 }
            ?? ConfigSchema.defaultValue(of: "telemetry.service_name")
        guard problems.isEmpty else {
            throw ConfigErrors(problems.sorted { ($0.line, $0.column) < ($1.line, $1.column) })
        }
        return settings
    }

    /// What a running hub connection and database were made from: when a reload changes these, only a restart
    /// applies them.
    public var connectionFingerprint: String {
        [
            hubURL.absoluteString, token.map { "token:" + String($0.value.hashValue) } ?? "", tokenFile ?? "",
            email ?? "",
            passwordFile ?? "", password.map { "password:" + String($0.value.hashValue) } ?? "",
            "\(accessTokenInQuery)",
            "\(skipNegotiation)", "\(keepAliveInterval)", "\(serverTimeout)", caFile ?? "", "\(insecureTLS)", storePath,
            storeDurability.rawValue,
            local.sharedStore?.description ?? "",
            local.sharedStorePasswordFile ?? "", local.replicaName ?? "",
            statusListen.map { "\($0.host):\($0.port)" } ?? "", otlpEndpoint?.absoluteString ?? "", serviceName,
        ].joined(separator: "\u{1}")
    }

    /// The keys' durations (their defaults when unset); a problem for each that is not one.
    static func durations(
        _ keys: [String], _ values: ConfigValues, into problems: inout [ConfigError]
    ) -> [String: TimeInterval] {
        var found: [String: TimeInterval] = [:]
        for key in keys {
            let text = values.value(key) ?? ""
            if let seconds = duration(text) {
                found[key] = seconds
            } else {
                problems.append(values.error(key, "'\(text)' is not a duration", fix: "e.g. 90s, 15m or 1h"))
            }
        }
        return found
    }

    /// "90s", "15m", "1h" (a number and its unit) in seconds; nil when it is not one.
    static func duration(_ text: String) -> TimeInterval? {
        let units: [String: TimeInterval] = ["s": 1, "m": 60, "min": 60, "h": 3600]
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        guard let split = trimmed.firstIndex(where: { !$0.isNumber }), let n = Int(trimmed[..<split]), n > 0,
            let unit = units[trimmed[split...].trimmingCharacters(in: .whitespaces)]
        else { return nil }
        return TimeInterval(n) * unit
    }

    /// A URL from the file as a message may show it: never a password written in it (user:secret@host).
    static func shown(_ url: String) -> String {
        url.contains("@") ? (URL(string: url)?.redactedForLogs ?? "the URL") : url
    }

    /// What the commands that work on the cache alone need (no server settings).
    public static func local(
        file: String?, environment: [String: String] = ProcessInfo.processInfo.environment
    )
        async throws(ConfigErrors) -> LocalSettings
    {
        try local(ConfigValues(file == nil ? nil : try ConfigFile.read(file!), environment))
    }

    /// What the commands that work on the cache alone need, from values already read.
    public static func local(_ values: ConfigValues) throws(ConfigErrors) -> LocalSettings {
        var problems: [ConfigError] = []
        let local = LocalSettings(values, values.environment, into: &problems)
        guard problems.isEmpty else { throw ConfigErrors(problems) }
        return local
    }

    /// `$STATE_DIRECTORY` (systemd), then `/var/lib/allowance-relay` for root, else the XDG state directory.
    static func defaultStorePath(_ env: [String: String]) -> String {
        if let dir = env["STATE_DIRECTORY"], !dir.isEmpty { return dir + "/relay.sqlite" }
        if getuid() == 0 { return "/var/lib/allowance-relay/relay.sqlite" }
        let state = env["XDG_STATE_HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? (NSHomeDirectory() + "/.local/state")
        return state + "/allowance-relay/relay.sqlite"
    }

    /// Where tokens come from: the configured token, the token file (read afresh before each connect, so a
    /// rotated token is picked up), or a login with email and password. Nil: no authentication.
    public func tokenSource(http: HTTPClient = .shared) -> (any TokenSource)? {
        if let token { return StaticToken(token) }
        if let tokenFile { return TokenFile(path: tokenFile) }
        if let email {
            let password = self.password
            let passwordFile = self.passwordFile
            return LoginSession(baseURL: serverURL, email: email, http: http, trust: serverTrust) {
                () throws(APIError) -> Secret in
                if let password { return password }
                return try Secret.read(file: passwordFile!, what: "password file")
            }
        }
        return nil
    }

    /// Whom the server's certificate must come from, for the hub, negotiate and REST alike.
    public var serverTrust: HTTPRequest.Trust { HTTPRequest.Trust(caFile: caFile, insecure: insecureTLS) }

    /// The REST client for this server (its trust, the token source given).
    public func apiClient(tokens: (any TokenSource)?, http: HTTPClient = .shared) -> APIClient {
        APIClient(
            baseURL: serverURL, tokens: tokens, http: http, trust: serverTrust, maxResponseBytes: maxResponseBytes)
    }

    /// Reads the secret files once, so that a missing or readable-by-others file stops the start with a clear
    /// message, placed at the key that names the file.
    public func secretFileErrors(_ values: ConfigValues) -> [ConfigError] {
        var errors: [ConfigError] = []
        for (key, path, what) in [
            ("server.token_file", tokenFile, "token file"),
            ("server.password_file", password == nil ? passwordFile : nil, "password file"),
            ("status.token_file", statusToken == nil ? statusTokenFile : nil, "token file"),
        ] {
            guard let path else { continue }
            do { _ = try Secret.read(file: path, what: what) } catch {
                errors.append(values.error(key, error.problem, fix: error.fix ?? "check the file"))
            }
        }
        return errors
    }
}

/// The database and its limits: read by `run` and by the commands that work offline on the cache.
public struct LocalSettings: Sendable {
    public var storePath: String
    /// Synced transactions older than this many days are pruned at start (nil: kept forever).
    public var keepTransactionsDays: Int?
    /// Most writes waiting in the outbox.
    public var outboxLimit: Int
    /// A write still refused for a retryable reason after this many attempts, or older than `outboxMaxAgeDays`,
    /// is given up (dead letter; its local effect undone).
    public var outboxMaxAttempts: Int
    public var outboxMaxAgeDays: Int
    /// The family's currency (`relay.currency`), named next to every amount the CLI prints as JSON.
    public var currency: String
    /// `store.url`: a PostgreSQL database shared by replicas, in place of the SQLite file (nil: the file).
    public var sharedStore: PostgresLocation?
    /// Its password (`store.password`, `ALLOWANCE_RELAY_STORE_PASSWORD`, or read from `store.password_file`).
    public var sharedStorePassword: Secret?
    public var sharedStorePasswordFile: String?
    /// `store.replica_name`: this relay's name among the replicas.
    public var replicaName: String?

    /// The shared database's password, read now (a file is read afresh: it may have been rotated).
    public func storePassword() throws(APIError) -> String? {
        if let sharedStorePassword { return sharedStorePassword.value }
        guard let file = sharedStorePasswordFile else { return nil }
        return try Secret.read(file: file, what: "store.password_file").value
    }

    init(_ values: ConfigValues, _ environment: [String: String], into problems: inout [ConfigError]) {
        storePath = values.path("store.path") ?? RelaySettings.defaultStorePath(environment)
        keepTransactionsDays = values.positive("store.keep_transactions_days", into: &problems)
        outboxLimit = values.count("outbox.limit", into: &problems)
        outboxMaxAttempts = values.count("outbox.max_attempts", into: &problems)
        outboxMaxAgeDays = values.count("outbox.max_age_days", into: &problems)
        currency = (values.value("relay.currency") ?? "").uppercased()
        if let text = values.string("store.url"), !text.isEmpty {
            do throws(PostgresError) {
                sharedStore = try PostgresLocation(text)
            } catch {
                // The message never repeats the URL: it may hold the password it refuses. Its advice is the fix.
                let parts = error.message.components(separatedBy: ": ")
                let (what, fix) =
                    parts.count > 1
                    ? (parts[0], parts.dropFirst().joined(separator: ": "))
                    : (error.message, "see store.url in config/reference.yaml")
                problems.append(values.error("store.url", what, fix: fix))
            }
        }
        sharedStorePassword = values.string("store.password").flatMap { $0.isEmpty ? nil : Secret($0) }
        sharedStorePasswordFile = values.path("store.password_file")
        if sharedStorePassword != nil, sharedStorePasswordFile != nil {
            problems.append(
                values.error("store.password", "is set together with store.password_file", fix: "keep one of them"))
        }
        replicaName = values.string("store.replica_name").flatMap { $0.isEmpty ? nil : $0 }
    }
}

extension String {
    fileprivate func trimmingSuffix(_ suffix: String) -> String {
        hasSuffix(suffix) ? String(dropLast(suffix.count)) : self
    }
}

extension TransportKind {
    /// As the configuration spells it (`server.transports`): `websockets`, `server_sent_events`, `long_polling`.
    public var configName: String {
        switch self {
        case .webSockets: "websockets"
        case .serverSentEvents: "server_sent_events"
        case .longPolling: "long_polling"
        }
    }

    public init?(configName: String) {
        guard let kind = Self.allCases.first(where: { $0.configName == configName }) else { return nil }
        self = kind
    }
}
