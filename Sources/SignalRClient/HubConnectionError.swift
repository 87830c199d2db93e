import WebSocketTransport

/// Why a connection could not start, or ended. Messages never contain tokens.
public struct HubConnectionError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Kind: Sendable, Equatable {
        /// The server refused the token (401/403). Retrying with the same token will not help.
        case unauthorized
        case negotiateFailed
        case handshakeFailed
        case transport(WebSocketError.Kind)
        case serverTimeout
        /// The server sent a Close message (with `allowReconnect`, a reconnect follows).
        case closedByServer(allowReconnect: Bool)
        case protocolError
        /// The connection is not in a state for this call (e.g. `invoke` while disconnected).
        case invalidState
        case stopped
    }

    public let kind: Kind
    public let message: String

    public init(_ kind: Kind, _ message: String) {
        self.kind = kind
        self.message = message
    }

    public var description: String { message }

    /// The socket went away underneath (as opposed to the server closing the connection on purpose).
    var isLinkLoss: Bool {
        switch kind {
        case .transport, .serverTimeout: return true
        default: return false
        }
    }

    /// The official clients' error for invocations pending when the connection drops.
    public static let canceledByClose = HubConnectionError(
        .stopped, "Invocation canceled due to the underlying connection being closed.")
}

/// The server's answer to an invocation was an error (Completion with `error`).
public struct HubInvocationError: Error, Sendable, Equatable, CustomStringConvertible {
    public let target: String
    public let message: String
    public var description: String { "'\(target)' failed on the server: \(message)" }

    public init(target: String, message: String) {
        self.target = target
        self.message = message
    }
}
