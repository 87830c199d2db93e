import Foundation
import HTTPTransport
import Logging
import SignalRProtocol
import WebSocketTransport

/// The result of negotiating: the connection to open, where, with which token, over which transports.
struct Negotiated: Sendable {
    /// The hub's URL after the protocol's redirects.
    var url: URL
    /// What goes in `id=` (nil: negotiation skipped).
    var socketId: String?
    var connectionId: String?
    var accessToken: String?
    /// Both sides agreed on stateful reconnect (WebSockets only).
    var statefulReconnect = false
    /// What the server offers; empty when it did not say (negotiation skipped, an old server): WebSockets.
    var offered: [NegotiateResponse.Transport] = []
    /// The token's lifetime, from a server that offers authentication refresh.
    var tokenLifetime: Duration?

    /// The transports to try, in the client's order of preference: offered by the server (a transport it did not
    /// list is never tried), allowed by the client, able to carry `format`. `skipped` says why the others were not.
    func plan(allowed: [TransportKind], format: TransferFormat) -> (tries: [TransportKind], skipped: [String]) {
        let offers =
            offered.isEmpty
            ? [NegotiateResponse.Transport(transport: "WebSockets", transferFormats: ["Text", "Binary"])] : offered
        var tries: [TransportKind] = []
        var skipped: [String] = []
        for offer in offers where TransportKind(rawValue: offer.transport) == nil {
            skipped.append("'\(offer.transport)' is not a transport this client knows.")
        }
        for kind in allowed {
            guard let offer = offers.first(where: { $0.transport == kind.rawValue }) else { continue }
            if !kind.carries(format) || !offer.transferFormats.contains(format.rawValue) {
                skipped.append(
                    "'\(kind.rawValue)' does not support the requested transfer format '\(format.rawValue)'.")
            } else if !tries.contains(kind) {
                tries.append(kind)
            }
        }
        for offer in offers {
            if let kind = TransportKind(rawValue: offer.transport), !allowed.contains(kind) {
                skipped.append("'\(kind.rawValue)' is disabled by the client.")
            }
        }
        return (tries, skipped)
    }

    /// The URL of `kind` for this connection: http becomes ws for WebSockets; `id=` and, in the query form, the token.
    func transportURL(_ kind: TransportKind, tokenInQuery: Bool) -> URL {
        Negotiator.transportURL(
            url, webSocket: kind == .webSockets, id: socketId, token: tokenInQuery ? accessToken : nil)
    }
}

/// `POST {hub}/negotiate?negotiateVersion=1`, following the protocol's own redirects (a `url` in the answer, at
/// most 100); an HTTP redirect is not followed (the token must not go wherever a 3xx points).
struct Negotiator: Sendable {
    static let maxRedirects = 100

    let options: HubConnectionOptions
    let logger: Logger

    func negotiate(hubURL: URL, accessToken: String?) async throws(HubConnectionError) -> Negotiated {
        if options.skipNegotiation {
            return Negotiated(url: hubURL, socketId: nil, connectionId: nil, accessToken: accessToken)
        }
        var url = hubURL
        var token = accessToken
        for _ in 0..<Self.maxRedirects {
            switch try await post(url, token: token) {
            case .connection(let c):
                return Negotiated(
                    url: url, socketId: c.socketId, connectionId: c.connectionId, accessToken: token,
                    statefulReconnect: options.useStatefulReconnect && c.useStatefulReconnect,
                    offered: c.availableTransports,
                    tokenLifetime: c.tokenLifetimeSeconds.map { .seconds(max(0, $0)) })
            case .redirect(let next, let newToken):
                guard let nextURL = URL(string: next) else {
                    throw HubConnectionError(.negotiateFailed, "The server redirected negotiate to an invalid URL.")
                }
                logger.debug("negotiate redirected", metadata: ["to": "\(nextURL.redactedForLogs)"])
                url = nextURL
                if let newToken {
                    guard HeaderValue.isSafe(newToken) else {
                        throw HubConnectionError(
                            .negotiateFailed, "The negotiate redirect's accessToken holds a control character: refused."
                        )
                    }
                    token = newToken
                }
            case .error(let message):
                throw HubConnectionError(.negotiateFailed, "The server refused to negotiate: \(message)")
            }
        }
        throw HubConnectionError(.negotiateFailed, "Negotiate redirection limit exceeded.")
    }

    private func post(_ url: URL, token: String?) async throws(HubConnectionError) -> NegotiateResponse {
        let negotiateURL = Self.negotiateURL(url, stateful: options.useStatefulReconnect)
        // Bounded like the handshake, and never on a pooled connection: after a network cut the kept-alive one is
        // dead without knowing it (found with a blackholing proxy, NetworkCutTests).
        var request = options.hubRequest(negotiateURL, token: token)
        request.freshConnection = true
        let response: HTTPResponse
        do {
            response = try await (options.httpClient ?? .shared).send(request)
        } catch {
            var failure = HubConnectionError(
                .negotiateFailed, "Negotiate at \(negotiateURL.redactedForLogs) failed: \(error.message)")
            failure.reachedNoServer = error.kind == .connect
            throw failure
        }
        let status = response.status
        switch status {
        case 200: break
        case 300..<400:
            let to = response.header("Location").flatMap {
                URL(string: $0, relativeTo: negotiateURL)?.absoluteURL.originForLogs
            }
            throw HubConnectionError(
                .negotiateFailed,
                "Negotiate at \(negotiateURL.redactedForLogs) was redirected (HTTP \(status)\(to.map { " to " + $0 } ?? "")); not followed, so that the token goes only to the configured server. Set the server URL to the hub's real address."
            )
        case 401, 403:
            throw HubConnectionError(
                .unauthorized,
                "The server refused the access token (HTTP \(status) from negotiate). Check the token; retrying with the same token will not help."
            )
        default:
            throw HubConnectionError(
                .negotiateFailed, "Negotiate at \(negotiateURL.redactedForLogs) answered HTTP \(status); expected 200.")
        }
        do {
            return try NegotiateResponse.decode(response.body)
        } catch {
            throw HubConnectionError(.negotiateFailed, "The negotiate answer is not valid: \(error.message)")
        }
    }

    /// `/negotiate` goes on the path; an existing query is kept; `negotiateVersion=1` is added.
    static func negotiateURL(_ url: URL, stateful: Bool = false) -> URL {
        var c = URLComponents(url: url, resolvingAgainstBaseURL: false)!
        var path = c.percentEncodedPath
        if path.hasSuffix("/") { path.removeLast() }
        c.percentEncodedPath = path + "/negotiate"
        var items = c.queryItems ?? []
        items.append(URLQueryItem(name: "negotiateVersion", value: "1"))
        if stateful { items.append(URLQueryItem(name: "useStatefulReconnect", value: "true")) }
        c.queryItems = items
        return c.url!
    }

    /// `{hub}/refresh?id=<token>`: `/refresh` on the path as `/negotiate` is, the original query kept.
    static func refreshURL(_ url: URL, id: String) -> URL {
        var c = URLComponents(url: url, resolvingAgainstBaseURL: false)!
        var path = c.percentEncodedPath
        if path.hasSuffix("/") { path.removeLast() }
        c.percentEncodedPath = path + "/refresh"
        c.queryItems = (c.queryItems ?? []) + [URLQueryItem(name: "id", value: id)]
        c.percentEncodedQuery = c.percentEncodedQuery?.replacingOccurrences(of: "+", with: "%2B")
        return c.url!
    }

    /// For a WebSocket http→ws, https→wss; plus `id=` (and `access_token=` in the query form).
    static func transportURL(_ url: URL, webSocket: Bool = true, id: String?, token: String?) -> URL {
        var c = URLComponents(url: url, resolvingAgainstBaseURL: false)!
        switch (c.scheme?.lowercased(), webSocket) {
        case ("https", true): c.scheme = "wss"
        case ("http", true): c.scheme = "ws"
        default: break
        }
        var items = c.queryItems ?? []
        if let id { items.append(URLQueryItem(name: "id", value: id)) }
        if let token { items.append(URLQueryItem(name: "access_token", value: token)) }
        c.queryItems = items.isEmpty ? nil : items
        // '+' is legal in a query but means space to many servers: encode it.
        c.percentEncodedQuery = c.percentEncodedQuery?.replacingOccurrences(of: "+", with: "%2B")
        return c.url!
    }
}

extension WebSocketOptions {
    /// The same authorities for negotiate as for the WebSocket.
    var trust: HTTPRequest.Trust { HTTPRequest.Trust(caFile: caFile, insecure: allowInsecureTLS) }
}
