import AllowanceAPI
import Config
import Foundation
import HTTPTransport
import Logging
import RelayDaemon
import SignalRClient

/// What `config check --probe` tries of the server, as `run` does it: the REST API `run` catches up from, then
/// negotiate and the handshake on the configured hub path, protocol and transports. A failure names the URL
/// actually requested and the likely fix: `config check` passed a misspelt hub path that `run` then retried for ever.
enum ServerProbe {
    struct Result {
        let what: String
        let ok: Bool
        let said: String
    }

    /// The REST API: the children, as the first catch-up reads them.
    static func rest(_ settings: RelaySettings, http: HTTPClient) async -> Result {
        let url = root(settings) + "/api/v1/children"
        let what = "server \(settings.serverURL.redactedForLogs)"
        do throws(APIError) {
            let children = try await settings.apiClient(tokens: settings.tokenSource(http: http), http: http).children()
            return Result(what: what, ok: true, said: "answered: \(children.count) child(ren)")
        } catch {
            var said = "GET \(URL(string: url)?.redactedForLogs ?? url): \(sentence(error.message))"
            if let hint = restHint(settings, error) { said += ". \(hint)" }
            return Result(what: what, ok: false, said: said)
        }
    }

    /// The hub: negotiate and the handshake, once (no retries), then a clean close.
    static func hub(_ settings: RelaySettings, http: HTTPClient) async -> Result {
        let what = "hub \(settings.hubURL.redactedForLogs)"
        do throws(HubConnectionError) {
            let transport = try await connect(settings, hubPath: settings.hubPath, http: http)
            return Result(what: what, ok: true, said: "connected over \(transport) (\(settings.hubProtocol.rawValue))")
        } catch {
            var said = sentence(error.message)
            // Negotiate's 404 (the error carries no status of its own): no hub at that path.
            if error.kind == .negotiateFailed, error.message.contains("HTTP 404") {
                let standard = "/hubs/family"
                if let root = siteRootHint(settings) {
                    said += ". \(root)"
                } else if normalized(settings.hubPath) != standard,
                    (try? await connect(settings, hubPath: standard, http: http)) != nil
                {
                    said = "no hub at \(settings.hubPath) (\(said)): did you mean server.hub_path: \(standard)?"
                } else {
                    said += ". No hub at that path: check server.hub_path (the Allowance Tracker hub is \(standard))"
                }
            }
            return Result(what: what, ok: false, said: said)
        }
    }

    /// Connects once and closes; the transport it connected over.
    private static func connect(
        _ settings: RelaySettings, hubPath: String, http: HTTPClient
    ) async throws(HubConnectionError) -> String {
        var probe = settings
        probe.hubPath = hubPath
        var options = Daemon.hubOptions(probe, http: http, tokens: probe.tokenSource(http: http))
        options.startRetryPolicy = nil
        options.reconnectPolicy = nil
        var logger = Logger(label: "probe")
        logger.logLevel = .critical
        let connection = HubConnection(url: probe.hubURL, options: options, logger: logger)
        try await connection.start()
        let transport = await connection.transport?.rawValue ?? "?"
        await connection.stop()
        return transport
    }

    /// Why a REST answer is not the Allowance Tracker API's, when the likely cause is the URL.
    static func restHint(_ settings: RelaySettings, _ error: APIError) -> String? {
        let notAnAPI =
            [404, 405, 501].contains(error.status ?? 0) || [.invalidResponse, .invalidPayload].contains(error.kind)
        guard notAnAPI else { return nil }
        return siteRootHint(settings)
            ?? "This is not an Allowance Tracker API (it has no /api/v1/children): check server.url"
    }

    /// A server.url that names the API rather than the site (`https://host/api`): the site's root instead.
    static func siteRootHint(_ settings: RelaySettings) -> String? {
        let path = settings.serverURL.path
        guard let range = path.range(of: "/api", options: .caseInsensitive),
            var site = URLComponents(url: settings.serverURL, resolvingAgainstBaseURL: false)
        else { return nil }
        site.path = String(path[..<range.lowerBound])
        site.query = nil
        return
            "server.url must be the site root, not .../api: try \(site.url?.redactedForLogs ?? "the site's root URL")"
    }

    /// A message as a clause: without its closing full stop, so that a hint can follow.
    private static func sentence(_ message: String) -> String {
        message.hasSuffix(".") ? String(message.dropLast()) : message
    }

    private static func root(_ settings: RelaySettings) -> String {
        withoutTrailingSlash(settings.serverURL.absoluteString)
    }

    private static func normalized(_ path: String) -> String {
        withoutTrailingSlash(path.hasPrefix("/") ? path : "/" + path).lowercased()
    }

    private static func withoutTrailingSlash(_ s: String) -> String { s.hasSuffix("/") ? String(s.dropLast()) : s }
}
