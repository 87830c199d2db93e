import Core
import Foundation

/// One whole WebSocket message (fragments already joined).
public enum WebSocketMessage: Sendable, Equatable {
    case text([UInt8])
    case binary([UInt8])

    public var bytes: [UInt8] {
        switch self {
        case .text(let b), .binary(let b): return b
        }
    }

    /// The payload's size in bytes.
    public var count: Int {
        switch self {
        case .text(let b), .binary(let b): return b.count
        }
    }
}

/// How the peer (or we) ended the connection.
public struct WebSocketClose: Sendable, Equatable, CustomStringConvertible {
    /// RFC 6455 status code; nil when the close frame carried none.
    public var code: UInt16?
    public var reason: String

    public init(code: UInt16?, reason: String = "") {
        self.code = code
        self.reason = reason
    }

    public var description: String {
        let c = code.map(String.init) ?? "none"
        return reason.isEmpty ? "close code \(c)" : "close code \(c) (\(reason))"
    }
}

/// Connection options. TLS certificates and host names are verified unless `allowInsecureTLS` is set.
public struct WebSocketOptions: Sendable {
    /// Extra request headers on the upgrade request (Authorization, User-Agent, ...).
    public var headers: [(name: String, value: String)] = []
    /// A larger incoming message is refused with close code 1009 and `WebSocketError.Kind.messageTooLarge`.
    public var maxMessageSize = 1 << 20
    /// PEM file of trusted CA certificates for `wss://`; the system store when nil.
    public var caFile: String?
    /// Skip certificate and host name checks. For tests only: every connect logs a warning.
    public var allowInsecureTLS = false
    /// How long DNS, TCP, TLS and the upgrade together may take.
    public var connectTimeout: Duration = .seconds(10)
    /// Which HTTP proxy a connection tunnels through, if any (a given loop's own applies instead).
    public var proxy: ProxyPolicy = .environment
    /// WebSocket-level pings after this much silence; the connection is dropped when a second interval
    /// passes without anything from the peer. Nil: no pings (a protocol above may keep the link alive itself).
    public var pingInterval: Duration?
    /// When this many received messages, or `receiveBufferBytes` of them, wait unread, the socket stops being
    /// read (`lws_rx_flow_control`) until the reader has taken half. The bytes bound the memory whatever the
    /// frames' size: 4,096 frames of 20 hub messages each held 34 MB.
    public var receiveBufferMessages = 4096
    public var receiveBufferBytes = 1 << 20

    public init() {}
}

/// Every failure is typed and says what happened in words a person can act on.
public struct WebSocketError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Kind: Sendable, Equatable {
        case invalidURL
        case dnsFailure
        case connectionRefused
        case timeout
        case tls
        /// The server answered the upgrade request with this HTTP status instead of 101.
        case upgradeRejected(status: Int)
        case messageTooLarge
        /// The connection ended without a close handshake (network cut, peer crash).
        case connectionLost
        /// `send` after the connection ended.
        case notConnected
        case setupFailed
    }

    public let kind: Kind
    public let message: String

    public init(_ kind: Kind, _ message: String) {
        self.kind = kind
        self.message = message
    }

    public var description: String { message }
}

/// A parsed ws:// or wss:// address.
struct WebSocketAddress: Sendable {
    let secure: Bool
    let host: String
    let port: Int
    /// Path and query, as sent in the request line.
    let path: String

    /// The URL again, for the proxy's decision.
    var url: URL { URL(string: "\(secure ? "wss" : "ws")://\(hostHeader)\(path)")! }

    /// The `Host` header: the port only when it is not the scheme's default (RFC 9110 7.2).
    var hostHeader: String {
        let bracketed = host.contains(":") ? "[\(host)]" : host
        return port == (secure ? 443 : 80) ? bracketed : "\(bracketed):\(port)"
    }

    init(_ url: URL) throws(WebSocketError) {
        guard let scheme = url.scheme?.lowercased(), scheme == "ws" || scheme == "wss" else {
            throw WebSocketError(.invalidURL, "'\(url.redactedForLogs)' is not a ws:// or wss:// URL.")
        }
        guard let host = url.host(percentEncoded: false), !host.isEmpty else {
            throw WebSocketError(.invalidURL, "'\(url.redactedForLogs)' has no host.")
        }
        secure = scheme == "wss"
        self.host = host
        port = url.port ?? (secure ? 443 : 80)
        var p = url.path(percentEncoded: true)
        if p.isEmpty { p = "/" }
        if let q = url.query(percentEncoded: true) { p += "?" + q }
        path = p
    }
}
