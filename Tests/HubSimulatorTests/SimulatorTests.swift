#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif
import Foundation
import SignalRProtocol
import TestSupport
import Testing

/// The stand-in backend as a client meets it: negotiate and REST behind the bearer token, and the fault switches
/// that the other suites rely on doing what they say.
@Suite struct SimulatorTests {
    static let token = "sim-test-token"

    func post(_ url: URL, token: String?) async throws -> (Int, [UInt8]) {
        var request = URLRequest(url: url)
        request.httpMethod = "POST"
        if let token { request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization") }
        let (data, response) = try await TestHTTP.data(for: request)
        return ((response as! HTTPURLResponse).statusCode, Array(data))
    }

    func get(_ url: URL, token: String?) async throws -> Int {
        var request = URLRequest(url: url)
        if let token { request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization") }
        let (_, response) = try await TestHTTP.data(for: request)
        return (response as! HTTPURLResponse).statusCode
    }

    @Test func negotiateWantsTheTokenAndOffersWebSockets() async throws {
        try await withSimulator(token: Self.token) { base in
            let negotiate = URL(string: base.absoluteString + "/hubs/family/negotiate?negotiateVersion=1")!
            #expect(try await post(negotiate, token: nil).0 == 401)
            #expect(try await post(negotiate, token: "wrong").0 == 401)
            let (status, body) = try await post(negotiate, token: Self.token)
            #expect(status == 200)
            guard case .connection(let c) = try NegotiateResponse.decode(body) else {
                Issue.record("not a connection: \(String(decoding: body, as: UTF8.self))")
                return
            }
            #expect(c.negotiateVersion == 1 && c.connectionToken?.isEmpty == false)
            #expect(c.availableTransports.contains { $0.transport == "WebSockets" && $0.transferFormats.contains("Text") })
        }
    }

    @Test func downAndUpSwitchTheRESTAPI() async throws {
        try await withSimulator(token: Self.token) { base in
            let children = base.appending(path: "api/v1/children")
            #expect(try await get(children, token: Self.token) == 200)
            #expect(try await get(children, token: nil) == 401)
            try await simPost(base, "/_sim/down")
            #expect(try await get(children, token: Self.token) == 503)
            try await simPost(base, "/_sim/up")
            #expect(try await get(children, token: Self.token) == 200)
        }
    }
}
