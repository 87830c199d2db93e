import Foundation

/// Which proxy, if any, a connection to a URL goes through, decided once for every transport (negotiate, the
/// WebSocket, Server-Sent Events, Long Polling, the REST API and webhooks): curl and libwebsockets each read the
/// environment their own way (libwebsockets only `http_proxy`, for every scheme, and never `no_proxy`), so a relay
/// could reach the hub's negotiate through a proxy and then try its WebSocket around it. Here `https_proxy` serves
/// https and wss, `http_proxy` http and ws, `all_proxy` either when the other is unset, and `no_proxy` (host names,
/// their subdomains, `*`) exempts; upper-case names count too, but `HTTP_PROXY` (which a CGI request can set). Only
/// HTTP proxies, reached with CONNECT; a `socks5://` or other proxy URL is not used.
public struct ProxyPolicy: Sendable, Equatable {
    public struct Proxy: Sendable, Equatable {
        public var host: String
        public var port: Int
        /// `user:password` from the proxy URL, if any. A secret: never logged.
        public var credentials: String?

        /// As curl takes it.
        public var url: String { "http://\(credentials.map { $0 + "@" } ?? "")\(host):\(port)" }
        /// As libwebsockets takes it (`user:password@host:port`).
        public var address: String { "\(credentials.map { $0 + "@" } ?? "")\(host):\(port)" }
    }

    public var https: Proxy?
    public var http: Proxy?
    public var exempt: [String]

    public init(environment: [String: String]) {
        func value(_ names: String...) -> String? { names.lazy.compactMap { environment[$0] }.first { !$0.isEmpty } }
        let all = value("all_proxy", "ALL_PROXY").flatMap(Self.parse)
        https = value("https_proxy", "HTTPS_PROXY").flatMap(Self.parse) ?? all
        http = value("http_proxy").flatMap(Self.parse) ?? all
        exempt = (value("no_proxy", "NO_PROXY") ?? "").split(separator: ",").map {
            var entry = $0.trimmingCharacters(in: .whitespaces).lowercased()
            while entry.hasPrefix(".") { entry.removeFirst() }
            return entry
        }.filter { !$0.isEmpty }
    }

    /// This process's environment, read once.
    public static let environment = ProxyPolicy(environment: ProcessInfo.processInfo.environment)
    /// No proxy at all.
    public static let direct = ProxyPolicy(environment: [:])

    /// The proxy for `url`, or nil to connect directly.
    public func proxy(for url: URL) -> Proxy? {
        // Without a proxy there is nothing to decide: no parse of the URL for every webhook sent.
        guard https != nil || http != nil, let host = url.host?.lowercased() else { return nil }
        let bare = host.hasPrefix("[") ? String(host.dropFirst().dropLast()) : host
        if exempt.contains(where: { $0 == "*" || bare == $0 || bare.hasSuffix("." + $0) }) { return nil }
        switch url.scheme?.lowercased() {
        case "https", "wss": return https
        case "http", "ws": return http
        default: return nil
        }
    }

    /// `http://user:pw@host:port`, `host:port` or `host` (port 1080, as curl); nil for another scheme.
    static func parse(_ text: String) -> Proxy? {
        let withScheme = text.contains("://") ? text : "http://" + text
        guard let c = URLComponents(string: withScheme), c.scheme?.lowercased() == "http", let host = c.host,
            !host.isEmpty
        else {
            return nil
        }
        let credentials = c.percentEncodedUser.map { user in c.percentEncodedPassword.map { "\(user):\($0)" } ?? user }
        return Proxy(host: host, port: c.port ?? 1080, credentials: credentials)
    }
}
