import AllowanceAPI
import Foundation
import HTTPTransport
import SignalRClient
import TestSupport
import Testing

/// The one HTTP client against servers that redirect elsewhere, answer without end or forge headers: a real
/// server on loopback for each (TestSupport's receiver), a second one as the other origin.
@Suite struct HTTPEdgeTests {
    /// A REST answer that redirects to another origin is refused with a clear error; the other origin never
    /// sees a request, so the token does not travel.
    @Test func aRESTRedirectToAnotherOriginIsRefusedAndTheTokenStaysHome() async throws {
        let elsewhere = WebhookReceiver()
        try await elsewhere.run { other in
            let api = WebhookReceiver { _, _ in
                .init(302, headers: ["Location": other.appending(path: "api/v1/children").absoluteString])
            }
            try await api.run { base in
                do throws(APIError) {
                    _ = try await APIClient(baseURL: base, token: "secret-token-123").children()
                    Issue.record("a redirect was followed")
                } catch {
                    #expect(
                        error.message.contains("redirected (HTTP 302 to \(other.originForLogs))")
                            && error.message.contains("not followed"), "\(error.message)")
                    #expect(!error.message.contains("secret-token-123") && !error.message.contains("api/v1/children?"))
                }
                #expect(
                    api.received.count == 1 && api.received[0].headers["authorization"] == "Bearer secret-token-123")
                #expect(elsewhere.received.isEmpty, "the other origin got nothing")
            }
        }
    }

    /// An HTTP redirect of negotiate is not followed either (the protocol's own redirect, a `url` in the answer,
    /// is the SignalR way); the connection fails with the reason.
    @Test func aNegotiateRedirectIsNotFollowed() async throws {
        let elsewhere = WebhookReceiver()
        try await elsewhere.run { other in
            let hub = WebhookReceiver { _, _ in
                .init(307, headers: ["Location": other.appending(path: "hubs/family/negotiate").absoluteString])
            }
            try await hub.run { base in
                var options = HubConnectionOptions()
                options.accessTokenProvider = { "secret-token-123" }
                let connection = HubConnection(url: base.appending(path: "hubs/family"), options: options)
                do throws(HubConnectionError) {
                    try await connection.start()
                    Issue.record("connected through a redirect")
                } catch {
                    #expect(
                        error.message.contains("was redirected (HTTP 307") && error.message.contains("not followed"),
                        "\(error.message)")
                }
                #expect(elsewhere.received.isEmpty)
            }
        }
    }

    /// An answer longer than the limit is cut off with an error that says how to raise it; the client holds no
    /// more than the limit (the server sent 3 MiB, the limit is 1 MiB).
    @Test func anAnswerOverTheLimitIsCutOffWithAClearError() async throws {
        let huge = "[" + String(repeating: "{\"id\":\"x\"},", count: 3 << 20 / 11) + "{}]"
        let api = WebhookReceiver { _, _ in .init(200, headers: ["Content-Type": "application/json"], body: huge) }
        try await api.run { base in
            do throws(APIError) {
                _ = try await APIClient(baseURL: base, tokens: nil, maxResponseBytes: 1 << 20).children()
                Issue.record("a 3 MiB answer was read")
            } catch {
                #expect(
                    error.message.contains("longer than 1048576 bytes")
                        && error.message.contains("server.max_response_bytes"), "\(error.message)")
            }
        }
    }
}
