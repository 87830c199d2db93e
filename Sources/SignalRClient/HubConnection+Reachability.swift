import Foundation
import HTTPTransport

// A backend that comes back is noticed within seconds, not after a minute of back-off: while the last attempt reached
// no server at all, the pause before the next one is cut short once a cheap request to the server's origin gets any
// answer. A server that answered wrongly (a 502 from a proxy, a 404) is not probed: its pause is waited out, so a
// broken backend is not retried faster than the policy says.
extension HubConnection {
    /// How often a pause asks whether the server is back.
    static let probeInterval: Duration = .seconds(3)

    /// Waits `pause` out, or less: `probe`, asked every `interval` while more than one interval is left, ends it
    /// early by answering true. Cancellation (a stop) ends it at once.
    static func pause(
        _ pause: Duration, endedEarlyBy probe: (@Sendable () async -> Bool)?, every interval: Duration = probeInterval
    ) async {
        let clock = ContinuousClock()
        let deadline = clock.now + pause
        guard let probe else {
            try? await Task.sleep(until: deadline, clock: clock)
            return
        }
        while !Task.isCancelled {
            let next = clock.now + interval
            guard next + interval < deadline else {
                try? await Task.sleep(until: deadline, clock: clock)
                return
            }
            try? await Task.sleep(until: next, clock: clock)
            if Task.isCancelled { return }
            if await probe() { return }
        }
    }

    /// A GET of the server's origin, without the token or any configured header: any HTTP answer means something
    /// listens again; only a failure to connect says no.
    func reachabilityProbe() -> @Sendable () async -> Bool {
        var components = URLComponents(url: url, resolvingAgainstBaseURL: false)
        components?.scheme = url.scheme == "wss" || url.scheme == "https" ? "https" : "http"
        components?.path = "/"
        components?.user = nil
        components?.password = nil
        components?.query = nil
        components?.fragment = nil
        guard let origin = components?.url else { return { false } }
        var request = HTTPRequest(
            .get, origin, timeout: .seconds(2), maxResponseBytes: 64 * 1024, trust: options.webSocket.trust)
        request.proxy = options.webSocket.proxy
        request.freshConnection = true
        request[header: "User-Agent"] = options.userAgent
        let client = options.httpClient ?? .shared
        return { [request] in
            do throws(HTTPError) {
                _ = try await client.send(request)
                return true
            } catch {
                // An answer too long to hold is an answer; a TLS failure is someone listening, too.
                return error.kind == .tooLarge || error.kind == .tls
            }
        }
    }
}
