import Foundation
import HTTPTransport
import SignalRProtocol
import WebSocketTransport

/// Everything a `HubConnection` can be told. Defaults are the official clients' defaults.
public struct HubConnectionOptions: Sendable {
    /// Asked before every negotiate and every reconnect (tokens expire during long connections).
    public var accessTokenProvider: (@Sendable () async throws -> String?)?
    /// Told when the server refused the provider's token (401/403 on negotiate), before the provider is asked
    /// once more: a provider that caches tokens drops its cached one here.
    public var accessTokenRefused: (@Sendable () async -> Void)?
    /// Send the token as the `access_token` query parameter (the browser form) instead of a bearer header.
    public var accessTokenInQuery = false
    /// Extra headers on negotiate and on the WebSocket upgrade.
    public var headers: [(name: String, value: String)] = []
    public var userAgent = "SignalRClient-Swift/1.0 (Linux)"
    /// The hub protocol: JSON (text) or MessagePack (binary; not over Server-Sent Events).
    public var hubProtocol: HubProtocolKind = .json
    /// The transports the client may use, in its order of preference; only those the server offers are tried, the
    /// next after one that fails to start (as the official clients fall back).
    public var transports: [TransportKind] = TransportKind.allCases
    /// Refresh the token on the live connection before it expires, where the server offers it (ASP.NET Core 11: its
    /// negotiate answer reports the token's lifetime); elsewhere a new token is taken at the next connect.
    public var authenticationRefresh = true
    /// How long before the token expires it is refreshed (one that lives less than this: halfway).
    public var refreshBeforeExpiration: Duration = .seconds(300)
    /// Go straight to the WebSocket (WebSockets only; no connection id, no stateful reconnect, not for Azure).
    public var skipNegotiation = false
    public var handshakeTimeout: Duration = .seconds(15)
    /// A Ping is sent when nothing else was sent for this long.
    public var keepAliveInterval: Duration = .seconds(15)
    /// The connection is closed when nothing at all arrived for this long.
    public var serverTimeout: Duration = .seconds(30)
    /// Reconnect after a lost connection. Nil: a lost connection is final (the official default).
    public var reconnectPolicy: (any RetryPolicy)?
    /// Also retry the first `start()` with this policy (the official clients never do).
    public var startRetryPolicy: (any RetryPolicy)?
    /// A link that ends sooner than this after it was made counts as short. After short links in a row (a hub
    /// that accepts and then drops the client, or sends garbage), each reconnect waits at least
    /// `shortLinkBackoff`, doubling per short link up to its maximum, whatever the policy says: such a hub is
    /// not stormed. A link that lasts resets it.
    public var stableLinkAfter: Duration = .seconds(30)
    public var shortLinkBackoff: (initial: Duration, maximum: Duration) = (.milliseconds(500), .seconds(60))
    /// Ask for stateful reconnect (ASP.NET Core 8+): a short network blip re-attaches the same connection and
    /// replays what the other side missed, instead of a new connection that loses messages.
    public var useStatefulReconnect = false
    /// Bytes of sent, unacknowledged messages kept for replay; further sends wait for Acks.
    public var statefulReconnectBufferSize = 100_000
    /// Options of the WebSocket under the connection (TLS, CA file, message size limit); negotiate trusts the
    /// same authorities.
    public var webSocket = WebSocketOptions()
    /// Negotiate goes through it (one client per process keeps one pool of connections); nil is
    /// `HTTPClient.shared`, made at the first negotiate, so that a program with a client of its own starts no
    /// second HTTP thread.
    public var httpClient: HTTPClient?
    /// The longest negotiate answer read (a few hundred bytes in practice; a hostile server must not make the
    /// client hold megabytes).
    public var maxNegotiateBytes = 64 * 1024

    public init() {}

    /// A POST to the hub's own endpoints (negotiate, refresh): bounded like the handshake, with the same trust, proxy
    /// and headers as every transport, and `token` as the bearer.
    func hubRequest(_ url: URL, token: String?) -> HTTPRequest {
        var request = HTTPRequest(.post, url, timeout: handshakeTimeout, maxResponseBytes: maxNegotiateBytes)
        request.trust = webSocket.trust
        request.proxy = webSocket.proxy
        for (name, value) in headers { request[header: name] = value }
        request[header: "User-Agent"] = userAgent
        if let token { request[header: "Authorization"] = "Bearer \(token)" }
        return request
    }
}
