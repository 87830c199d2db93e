import CLibWebSockets
import Core
import Foundation
import Logging
import Synchronization

/// A WebSocket client connection on libwebsockets.
///
/// Each connection lives on a `WebSocketLoop`: one lws context served by one thread. lws is single-threaded: other
/// threads only queue work under a lock and wake the loop with `lws_cancel_service`; every lws call on the connection
/// happens on the loop's thread. A connection made without a loop gets one of its own, which ends with it.
public final class WebSocket: Sendable {
    /// The messages as they arrive, in order. Iteration ends (nil) after a close handshake and throws a
    /// `WebSocketError` when the connection breaks. Read it from one task.
    public let messages: MessageInbox

    private let core: LWSConnection

    private init(core: LWSConnection) {
        self.core = core
        self.messages = core.inbox
    }

    /// Opens a connection and waits for the upgrade to complete.
    /// - Parameters:
    ///   - url: a `ws://` or `wss://` URL (any other is refused as `.invalidURL`).
    ///   - options: headers, TLS trust, timeouts and the message size limit.
    ///   - logger: where the connection says what happened (never a header's value).
    ///   - loop: the loop to serve the connection on (an actor whose executor it is reads the frames on the thread
    ///     that received them); nil: a loop of its own. A given loop's CA file and connect timeout apply, not those
    ///     of `options`.
    public static func connect(
        to url: URL, options: WebSocketOptions = .init(), logger: Logger = Logger(label: "websocket"),
        loop: WebSocketLoop? = nil
    ) async throws(WebSocketError) -> WebSocket {
        let address = try WebSocketAddress(url)
        // The header's name only: its value may be a secret.
        if let bad = options.headers.first(where: { !HeaderValue.isSafe($0.value) || !HeaderValue.isSafe($0.name) }) {
            throw WebSocketError(
                .setupFailed,
                "The request header '\(bad.name)' holds a line break or another control character: refused.")
        }
        if address.secure && options.allowInsecureTLS {
            logger.warning(
                "TLS certificate and host name checks are OFF for this connection (insecure option; tests only)",
                metadata: ["host": "\(address.host)"])
        }
        let core = LWSConnection(address: address, options: options, loop: loop)
        let result: Result<Void, WebSocketError> = await withCheckedContinuation { continuation in
            core.start { continuation.resume(returning: $0) }
        }
        if case .failure(let error) = result {
            await core.waitUntilStopped()
            throw error
        }
        return WebSocket(core: core)
    }

    /// Queues a message; frames are written in order by the service thread.
    public func send(_ message: WebSocketMessage) throws(WebSocketError) {
        try core.enqueue(message)
    }

    /// Whether more input is already waiting in the socket, unread: a reader on the connection's loop can take it
    /// in before handing on what it has. False off the loop's thread (it cannot tell there).
    public var hasUnreadInput: Bool {
        core.loop.isLoopThread && core.hasUnreadInput
    }

    /// Bytes queued for sending and not yet handed to the socket.
    public var bufferedAmount: Int { core.bufferedAmount }

    /// How the connection ended, once it has.
    public var closeInfo: WebSocketClose? { core.closeInfo }

    /// Sends a close frame with `code` and `reason`, waits briefly for the peer's answer, and returns once lws
    /// has let go of the connection.
    public func close(code: UInt16 = 1000, reason: String = "") async {
        core.requestClose(code: code, reason: reason)
        await core.waitUntilStopped(grace: .seconds(2))
    }
}

final class HookBox: Sendable {
    let hook: @Sendable () -> Void
    init(_ hook: @escaping @Sendable () -> Void) { self.hook = hook }
}
