import WebSocketTransport

/// The SignalRClient module's one error: why a connection could not start or ended, why a call could not be made,
/// or the server's error for one invocation (`.invocationFailed`, .NET's `HubException`). Messages never contain
/// tokens.
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
        /// The server answered an invocation of `target` with an error (a Completion with `error`, which is the
        /// `message`); the connection carries on.
        case invocationFailed(target: String)
    }

    public let kind: Kind
    public let message: String

    public init(_ kind: Kind, _ message: String) {
        self.kind = kind
        self.message = message
    }

    public var description: String {
        if case .invocationFailed(let target) = kind { return "'\(target)' failed on the server: \(message)" }
        return message
    }

    /// The attempt reached no server at all (refused, no route, no such host), as opposed to a server that answered
    /// wrongly: while retrying, a cheap probe may end the pause as soon as something answers again.
    var reachedNoServer = false

    var serverUnreachable: Bool {
        reachedNoServer || kind == .transport(.connectionRefused) || kind == .transport(.dnsFailure)
    }

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
