import Configuration
import Foundation
import HTTPTransport
import Yams

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
    public var caFile: String?
    /// Skip TLS checks. For tests against self-signed servers only: logged loudly at every connect.
    public var insecureTLS: Bool
    /// The longest REST answer read (`server.max_response_bytes`, default 8 MiB): a page is some kilobytes.
    public var maxResponseBytes = APIClient.defaultMaxResponseBytes
    public var storePath: String { local.storePath }
    /// `full` (a committed row survives power loss) or `normal` (faster; the last writes may be lost in a power cut).
    public var storeDurability: String
    /// Retention and outbox limits: also what the offline CLI commands read.
    public var local: LocalSettings
    public var logLevel: String
    public var logFormat: LogFormat
    /// `status.listen`: where `/healthz` and `/metrics` are served (nil: not served).
    public var statusListen: (host: String, port: Int)?

    public enum LogFormat: String, Sendable { case text, json }

    public var hubURL: URL {
        var path = hubPath
        if !path.hasPrefix("/") { path = "/" + path }
        return URL(string: serverURL.absoluteString.trimmingSuffix("/") + path) ?? serverURL
    }

    /// Loads settings: `file` (if given; it must exist), then the environment on top.
    public static func load(file: String?, environment: [String: String] = ProcessInfo.processInfo.environment)
        async throws(SettingsError) -> RelaySettings
    {
        let config = try await reader(file: file, environment: environment)

        guard let urlText = config.string(forKey: "server.url"), !urlText.isEmpty else {
            throw SettingsError(
                "No server URL. Set server.url in the config file or ALLOWANCE_RELAY_SERVER_URL (e.g. http://127.0.0.1:5000).")
        }
        guard let url = URL(string: urlText), let scheme = url.scheme?.lowercased(), ["http", "https"].contains(scheme),
            url.host() != nil
        else {
            throw SettingsError("server.url '\(urlText)' is not an http:// or https:// URL with a host.")
        }
        let token = config.string(forKey: "server.token", isSecret: true).flatMap { $0.isEmpty ? nil : Secret($0) }
        let tokenFile = config.string(forKey: "server.token_file")
        let email = config.string(forKey: "server.email").flatMap { $0.isEmpty ? nil : $0 }
        let password = config.string(forKey: "server.password", isSecret: true).flatMap { $0.isEmpty ? nil : Secret($0) }
        let passwordFile = config.string(forKey: "server.password_file")
        if email != nil, token != nil || tokenFile != nil {
            throw SettingsError("Both a token and server.email are set: keep one way to sign in (remove server.token* or server.email).")
        }
        if email != nil, password == nil, passwordFile == nil {
            throw SettingsError("server.email is set without a password: set server.password_file (mode 600) or ALLOWANCE_RELAY_SERVER_PASSWORD.")
        }
        let format = config.string(forKey: "log.format", default: "text")
        guard let logFormat = LogFormat(rawValue: format) else {
            throw SettingsError("log.format must be text or json, not '\(format)'.")
        }
        let durability = config.string(forKey: "store.durability", default: "full")
        guard ["full", "normal"].contains(durability) else {
            throw SettingsError("store.durability must be full or normal, not '\(durability)'.")
        }
        var statusListen: (String, Int)?
        if let listen = config.string(forKey: "status.listen"), !listen.isEmpty {
            // "9464" or "127.0.0.1:9464" (the host defaults to loopback: the endpoint has no authentication).
            let parts = listen.split(separator: ":", omittingEmptySubsequences: false)
            let host = parts.count == 2 ? String(parts[0]) : "127.0.0.1"
            guard parts.count <= 2, let port = Int(parts.last!), (1...65535).contains(port), !host.isEmpty else {
                throw SettingsError("status.listen must be PORT or HOST:PORT (e.g. 127.0.0.1:9464), not '\(listen)'.")
            }
            statusListen = (host, port)
        }
        // Read as text and parsed here: the file gives every value as text, and a typed read of "true" from it
        // quietly gave the default (the environment's worked), while `config check` said OK.
        func flag(_ key: String) throws(SettingsError) -> Bool {
            guard let text = config.string(forKey: ConfigKey(key.split(separator: ".").map(String.init))) else { return false }
            switch text.lowercased() {
            case "true", "yes", "on", "1": return true
            case "false", "no", "off", "0", "": return false
            default: throw SettingsError("\(key) must be true or false, not '\(text)'.")
            }
        }
        let level = config.string(forKey: "log.level", default: "info")
        guard ["trace", "debug", "info", "notice", "warning", "error", "critical"].contains(level) else {
            throw SettingsError("log.level must be one of trace, debug, info, notice, warning, error, critical; not '\(level)'.")
        }
        var maxResponseBytes = APIClient.defaultMaxResponseBytes
        if let text = config.string(forKey: "server.max_response_bytes") {
            guard let n = Int(text), n >= 65536 else {
                throw SettingsError("server.max_response_bytes must be a number of bytes, at least 65536; not '\(text)'.")
            }
            maxResponseBytes = n
        }
        return RelaySettings(
            serverURL: url,
            hubPath: config.string(forKey: "server.hub_path", default: "/hubs/family"),
            token: token,
            tokenFile: tokenFile,
            email: email,
            password: password,
            passwordFile: passwordFile,
            accessTokenInQuery: try flag("server.access_token_in_query"),
            skipNegotiation: try flag("server.skip_negotiation"),
            caFile: config.string(forKey: "server.ca_file"),
            insecureTLS: try flag("server.insecure_tls"),
            maxResponseBytes: maxResponseBytes,
            storeDurability: durability,
            local: try LocalSettings(config, environment),
            logLevel: level,
            logFormat: logFormat,
            statusListen: statusListen)
    }

    /// What a running hub connection and database were made from: when a reload changes these, only a restart
    /// applies them.
    public var connectionFingerprint: String {
        [
            hubURL.absoluteString, token.map { "token:" + String($0.value.hashValue) } ?? "", tokenFile ?? "", email ?? "",
            passwordFile ?? "", password.map { "password:" + String($0.value.hashValue) } ?? "", "\(accessTokenInQuery)",
            "\(skipNegotiation)", caFile ?? "", "\(insecureTLS)", storePath, storeDurability,
            statusListen.map { "\($0.host):\($0.port)" } ?? "",
        ].joined(separator: "\u{1}")
    }

    /// What the commands that work on the cache alone need (no server settings).
    public static func local(file: String?, environment: [String: String] = ProcessInfo.processInfo.environment)
        async throws(SettingsError) -> LocalSettings
    {
        try LocalSettings(try await reader(file: file, environment: environment), environment)
    }

    /// The file's keys with `ALLOWANCE_RELAY_*` environment variables on top.
    private static func reader(file: String?, environment: [String: String]) async throws(SettingsError) -> ConfigReader {
        var providers: [any ConfigProvider] = [
            EnvironmentVariablesProvider(environmentVariables: environment).prefixKeys(with: "allowance_relay")
        ]
        if let file {
            guard FileManager.default.isReadableFile(atPath: file), let text = try? String(contentsOfFile: file, encoding: .utf8) else {
                throw SettingsError("Cannot read the config file '\(file)'. Check the path and its permissions.")
            }
            providers.append(InMemoryProvider(name: file, values: try scalars(yaml: text, file: file)))
        }
        return ConfigReader(providers: providers)
    }

    /// Every key the file may have, by section (`sinks`, `rules` and `templates` are checked by the relay's parser).
    static let knownKeys: [String: Set<String>] = [
        "server": [
            "url", "hub_path", "token", "token_file", "email", "password", "password_file", "access_token_in_query",
            "skip_negotiation", "ca_file", "insecure_tls", "max_response_bytes",
        ],
        "store": ["path", "durability", "keep_transactions_days"],
        "outbox": ["limit", "max_attempts", "max_age_days"],
        "log": ["level", "format"],
        "status": ["listen"],
        "relay": ["currency", "locale", "link", "connection_lost_minutes"],
        "sinks": [], "rules": [], "templates": [],
    ]

    /// The file's single values by dotted key (`server.url`). Lists and the relay's sections (`sinks`, `rules`,
    /// `templates`) are read by the relay's own parser, which reports their mistakes with line numbers.
    static func scalars(yaml: String, file: String) throws(SettingsError) -> [AbsoluteConfigKey: ConfigValue] {
        let root: Node?
        do {
            root = try Yams.compose(yaml: yaml)
        } catch {
            throw SettingsError("The config file '\(file)' is not valid YAML: \(error)")
        }
        var values: [AbsoluteConfigKey: ConfigValue] = [:]
        var mistake: SettingsError?
        func walk(_ node: Node, _ path: [String]) {
            if let scalar = node.scalar {
                values[AbsoluteConfigKey(path)] = ConfigValue(.string(scalar.string), isSecret: path.last?.hasSuffix("token") == true || path.last == "password")
            } else if let map = node.mapping {
                for (k, v) in map {
                    guard let key = k.string, !(path.isEmpty && ["sinks", "rules", "templates"].contains(key)) else { continue }
                    let dotted = (path + [key]).joined(separator: ".")
                    let known = path.isEmpty ? Set(knownKeys.keys) : knownKeys[path[0]] ?? []
                    if path.count <= 1, !known.contains(key), mistake == nil {
                        mistake = SettingsError(
                            "\(file):\(k.mark?.line ?? 0): \(dotted): is not a known key. Fix: use one of "
                                + known.sorted().map { path.isEmpty ? $0 : "\(path[0]).\($0)" }.joined(separator: ", ") + ".")
                    }
                    walk(v, path + [key])
                }
            }
        }
        if let root { walk(root, []) }
        if let mistake { throw mistake }
        return values
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
            return LoginSession(baseURL: serverURL, email: email, http: http, trust: serverTrust) { () throws(SettingsError) -> Secret in
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
        APIClient(baseURL: serverURL, tokens: tokens, http: http, trust: serverTrust, maxResponseBytes: maxResponseBytes)
    }

    /// Reads the secret files once, so a missing or readable-by-others file stops the start with a clear message.
    public func checkSecretFiles() throws(SettingsError) {
        if let tokenFile { _ = try Secret.read(file: tokenFile, what: "token file") }
        if let passwordFile, password == nil { _ = try Secret.read(file: passwordFile, what: "password file") }
    }
}

/// The database and its limits: read by `run` and by the commands that work offline on the cache.
public struct LocalSettings: Sendable {
    public var storePath: String
    /// Synced transactions older than this many days are pruned at start (nil: kept forever).
    public var keepTransactionsDays: Int?
    /// Most writes waiting in the outbox (seed 001: 100).
    public var outboxLimit: Int
    /// A write still refused for a retryable reason after this many attempts, or older than `outboxMaxAgeDays`,
    /// is given up (dead letter; its local effect undone).
    public var outboxMaxAttempts: Int
    public var outboxMaxAgeDays: Int
    /// The family's currency (`relay.currency`), named next to every amount the CLI prints as JSON.
    public var currency: String

    init(_ config: ConfigReader, _ environment: [String: String]) throws(SettingsError) {
        func positive(_ key: String, _ fallback: Int?) throws(SettingsError) -> Int? {
            guard let text = config.string(forKey: ConfigKey(key.split(separator: ".").map(String.init))) else { return fallback }
            guard let n = Int(text), n > 0 else { throw SettingsError("\(key) must be a whole number above 0, not '\(text)'.") }
            return n
        }
        storePath = config.string(forKey: "store.path") ?? RelaySettings.defaultStorePath(environment)
        keepTransactionsDays = try positive("store.keep_transactions_days", nil)
        outboxLimit = try positive("outbox.limit", 100)!
        outboxMaxAttempts = try positive("outbox.max_attempts", 10)!
        outboxMaxAgeDays = try positive("outbox.max_age_days", 7)!
        currency = (config.string(forKey: "relay.currency") ?? "USD").uppercased()
    }
}

/// A secret value that never prints itself.
public struct Secret: Sendable, CustomStringConvertible, CustomDebugStringConvertible {
    public let value: String
    public init(_ value: String) { self.value = value }
    public var description: String { "<redacted>" }
    public var debugDescription: String { "<redacted>" }

    /// Reads a secret file: trimmed, must not be empty; a file others can read is refused (chmod 600 it).
    /// `what` names the file in messages ("token file", "webhook secret file").
    public static func read(file given: String, what: String) throws(SettingsError) -> Secret {
        let file = (given as NSString).expandingTildeInPath
        var info = stat()
        guard stat(file, &info) == 0 else {
            throw SettingsError("Cannot read the \(what) '\(file)': \(String(cString: strerror(errno))).")
        }
        // A pipe or a device would block or never end; a secret is a line, not megabytes.
        guard info.st_mode & S_IFMT == S_IFREG else {
            throw SettingsError("The \(what) '\(file)' is not a regular file. Point it at a file holding the secret on one line.")
        }
        guard info.st_size <= 65536 else {
            throw SettingsError("The \(what) '\(file)' is \(info.st_size) bytes; a secret file holds one line (at most 64 KB). Is it the right file?")
        }
        if info.st_mode & 0o077 != 0 {
            throw SettingsError(
                "The \(what) '\(file)' can be read by other users (mode \(String(info.st_mode & 0o777, radix: 8))). Run: chmod 600 '\(file)'")
        }
        guard let data = FileManager.default.contents(atPath: file) else {
            throw SettingsError("Cannot read the \(what) '\(file)'. Check its owner and permissions.")
        }
        let text = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        guard !text.isEmpty else { throw SettingsError("The \(what) '\(file)' is empty.") }
        return Secret(text)
    }
}

public struct SettingsError: Error, Sendable, CustomStringConvertible {
    public let message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}

extension String {
    fileprivate func trimmingSuffix(_ suffix: String) -> String {
        hasSuffix(suffix) ? String(dropLast(suffix.count)) : self
    }
}
