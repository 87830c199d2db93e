import Foundation
import HTTPTransport
import SignalRProtocol
import Synchronization
import WebSocketTransport

/// What the connection needs of an open transport: payloads out in order, whole transport messages in (a WebSocket
/// message, one Server-Sent Event, one poll's body) through an inbox read on the connection's loop, and an end.
protocol HubTransport: AnyObject, Sendable {
    var kind: TransportKind { get }
    var inbox: MessageInbox { get }
    /// Queues a payload (one or more framed hub messages); payloads go out in order.
    func send(_ payload: [UInt8]) throws(HubConnectionError)
    /// More input is already waiting, unread (only a WebSocket on its loop can tell).
    var hasUnreadInput: Bool { get }
    /// How the transport ended, once it has, for the log.
    var endDescription: String? { get }
    func close() async
}

/// A WebSocket as the hub's transport: text frames for JSON, binary frames for MessagePack.
final class WebSocketHubTransport: HubTransport {
    let socket: WebSocket
    let format: TransferFormat
    var kind: TransportKind { .webSockets }
    var inbox: MessageInbox { socket.messages }

    init(_ socket: WebSocket, format: TransferFormat) {
        self.socket = socket
        self.format = format
    }

    func send(_ payload: [UInt8]) throws(HubConnectionError) {
        do {
            try socket.send(format == .text ? .text(payload) : .binary(payload))
        } catch {
            throw HubConnectionError(.transport(error.kind), error.message)
        }
    }

    var hasUnreadInput: Bool { socket.hasUnreadInput }
    var endDescription: String? { socket.closeInfo.map { "\($0)" } }
    func close() async { await socket.close() }
}

/// The bearer token an HTTP transport's requests carry: the one the connection opened with, until an authentication
/// refresh replaces it (a poll or a send after the old one expired would be refused).
final class BearerToken: Sendable {
    private let value: Mutex<String?>
    init(_ token: String?) { value = Mutex(token) }
    var current: String? { value.withLock { $0 } }
    func replace(with token: String?) { value.withLock { $0 = token } }
}

/// Where an HTTP transport (Server-Sent Events, Long Polling) sends and reads: `{base}?id=<token>`, with the same
/// headers on every request (the bearer token as it is now, the user agent, the caller's own).
struct HTTPTransportTarget: Sendable {
    var url: URL
    var headers: [(name: String, value: String)]
    /// nil when the token goes in the URL instead (`access_token=`).
    var bearer: BearerToken?
    var trust: HTTPRequest.Trust
    var proxy: ProxyPolicy
    /// The longest answer read: one poll carries several messages (a server's own buffer bounds it: 64 KiB in
    /// ASP.NET Core), each at most the message size limit.
    var maxAnswerBytes: Int
    var client: HTTPClient
    var format: TransferFormat

    func request(_ method: HTTPRequest.Method, body: [UInt8] = [], timeout: Duration) -> HTTPRequest {
        var r = HTTPRequest(method, url, body: body, timeout: timeout, maxResponseBytes: maxAnswerBytes, trust: trust)
        r.proxy = proxy
        for (name, value) in headers { r[header: name] = value }
        if let token = bearer?.current { r[header: "Authorization"] = "Bearer \(token)" }
        return r
    }

    /// What a status means for the connection: nil for 200, else why it is over.
    static func refusal(_ status: Int, _ what: String) -> HubConnectionError? {
        switch status {
        case 200, 202: nil
        case 401, 403:
            HubConnectionError(.unauthorized, "The server refused the access token (HTTP \(status) on \(what)).")
        case 404:
            HubConnectionError(
                .transport(.connectionLost), "The server no longer knows this connection (HTTP 404 on \(what)).")
        default: HubConnectionError(.transport(.connectionLost), "The server answered HTTP \(status) on \(what).")
        }
    }
}

/// Sends an HTTP transport's payloads by POST, one request at a time so that they keep their order; payloads queued
/// while one is under way go together in the next (each hub message is framed, so they can share a body).
final class HTTPSendQueue: Sendable {
    private struct State {
        var queued: [UInt8] = []
        var sending = false
        var failure: HubConnectionError?
    }

    private let state = Mutex(State())
    private let target: HTTPTransportTarget
    private let onFailure: @Sendable (HubConnectionError) -> Void

    init(_ target: HTTPTransportTarget, onFailure: @escaping @Sendable (HubConnectionError) -> Void) {
        self.target = target
        self.onFailure = onFailure
    }

    func send(_ payload: [UInt8]) throws(HubConnectionError) {
        let start = try state.withLock { s throws(HubConnectionError) -> Bool in
            if let failure = s.failure { throw failure }
            s.queued += payload
            defer { s.sending = true }
            return !s.sending
        }
        if start { Task { await drain() } }
    }

    /// Refuses further sends (the transport is closing).
    func stop(_ reason: HubConnectionError) {
        state.withLock { s in if s.failure == nil { s.failure = reason } }
    }

    private func drain() async {
        while true {
            let body = state.withLock { s -> [UInt8]? in
                guard s.failure == nil, !s.queued.isEmpty else {
                    s.sending = false
                    return nil
                }
                defer { s.queued = [] }
                return s.queued
            }
            guard let body else { return }
            var request = target.request(.post, body: body, timeout: .seconds(30))
            request[header: "Content-Type"] =
                target.format == .text ? "text/plain;charset=UTF-8" : "application/octet-stream"
            let failure: HubConnectionError?
            do {
                let answer = try await target.client.send(request)
                failure = HTTPTransportTarget.refusal(answer.status, "send")
            } catch {
                failure = HubConnectionError(.transport(.connectionLost), "Sending failed: \(error.message)")
            }
            if let failure {
                state.withLock { s in
                    s.failure = s.failure ?? failure
                    s.sending = false
                }
                onFailure(failure)
                return
            }
        }
    }
}
