import Foundation
import HTTPTransport
import SignalRProtocol

// Authentication refresh (ASP.NET Core 11): a server that offers it reports the token's lifetime in the negotiate
// answer and maps `POST {hub}/refresh?id=<connection token>`; the client sends a fresh token there before the old
// one expires, and the live connection carries on (no reconnect, nothing missed). A server without it keeps
// today's behaviour: a new token at the next connect.
extension HubConnection {
    /// When to refresh a token that lives `lifetime`: `refreshBeforeExpiration` before it ends, or halfway for one
    /// that lives less than that (as the official clients).
    static func refreshDelay(lifetime: Duration, before: Duration) -> Duration {
        lifetime > before ? lifetime - before : lifetime / 2
    }

    /// Starts (or restarts) the timer for the connection negotiated as `negotiated`: nothing to schedule without a
    /// lifetime, a token source, a connection token, or with refresh turned off.
    func scheduleAuthenticationRefresh(_ negotiated: Negotiated) {
        stopAuthenticationRefresh()
        guard options.authenticationRefresh, options.accessTokenProvider != nil, let id = negotiated.socketId,
            let lifetime = negotiated.tokenLifetime
        else { return }
        refreshTarget = Negotiator.refreshURL(negotiated.url, id: id)
        tokenExpiry = .now + lifetime
        scheduleRefresh(in: Self.refreshDelay(lifetime: lifetime, before: options.refreshBeforeExpiration))
    }

    /// Forgets the live connection's refresh: its timer, where it goes, when the token expires.
    func stopAuthenticationRefresh() {
        authRefreshTask?.cancel()
        authRefreshTask = nil
        refreshTarget = nil
        tokenExpiry = nil
    }

    /// When to try a failed refresh again: halfway to the token's expiry, while that is a second or more away.
    static func retryDelay(now: ContinuousClock.Instant, expiry: ContinuousClock.Instant?) -> Duration? {
        guard let expiry else { return nil }
        let half = (expiry - now) / 2
        return half >= .seconds(1) ? half : nil
    }

    private func scheduleRefresh(in delay: Duration) {
        authRefreshTask = Task { [weak self] in
            try? await Task.sleep(for: delay)
            guard !Task.isCancelled else { return }
            await self?.automaticRefresh()
        }
    }

    private func automaticRefresh() async {
        guard refreshTarget != nil else { return }
        do {
            _ = try await refreshAuthentication()
        } catch {
            // A server restarting or a network blip: tried again halfway to the expiry while a second or more is
            // left. After that, the server ends the connection when the old token expires (if it closes on
            // expiry), and the reconnect takes a new token, as without refresh.
            if let again = Self.retryDelay(now: .now, expiry: tokenExpiry) {
                logger.warning(
                    "could not refresh the access token on the live connection (trying again in \(again)): \(error.message)"
                )
                scheduleRefresh(in: again)
            } else {
                logger.warning("could not refresh the access token on the live connection: \(error.message)")
            }
        }
    }

    /// Sends a fresh token from the token source to the server for the live connection, now. Returns the new token's
    /// lifetime as the server reports it (nil: it did not say), and schedules the next refresh from it.
    @discardableResult
    public func refreshAuthentication() async throws(HubConnectionError) -> Duration? {
        guard let target = refreshTarget else {
            throw HubConnectionError(
                .invalidState, "The server did not offer authentication refresh for this connection.")
        }
        let fresh = try await token(fresh: true)
        let request = options.hubRequest(target, token: fresh)
        let answer: HTTPResponse
        do {
            answer = try await (options.httpClient ?? .shared).send(request)
        } catch {
            throw HubConnectionError(.negotiateFailed, "Authentication refresh failed: \(error.message)")
        }
        let body = try? JSONValue(parsing: answer.body)
        if let error = body?["error"]?.stringValue {
            throw HubConnectionError(
                answer.status == 401 || answer.status == 403 ? .unauthorized : .negotiateFailed,
                "The server refused the refresh: \(error)")
        }
        guard answer.status == 200 else {
            throw HubConnectionError(
                answer.status == 401 || answer.status == 403 ? .unauthorized : .negotiateFailed,
                "Unexpected status code returned from authentication refresh: HTTP \(answer.status).")
        }
        bearerInUse?.replace(with: fresh)
        let lifetime = body?["tokenLifetimeSeconds"]?.intValue.map { Duration.seconds($0) }
        logger.info(
            "refreshed the access token on the live connection",
            metadata: [
                "next":
                    "\(lifetime.map { "\(Self.refreshDelay(lifetime: $0, before: options.refreshBeforeExpiration))" } ?? "-")"
            ])
        tokenExpiry = lifetime.map { .now + $0 }
        if let lifetime, options.authenticationRefresh {
            scheduleRefresh(in: Self.refreshDelay(lifetime: lifetime, before: options.refreshBeforeExpiration))
        }
        return lifetime
    }
}
