import Foundation
import TestSupport
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

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
            // Read with Foundation's parser: the client's codec is not this test's oracle.
            let answer = try #require(try JSONSerialization.jsonObject(with: Data(body)) as? [String: Any])
            #expect((answer["negotiateVersion"] as? NSNumber)?.intValue == 1)
            #expect((answer["connectionToken"] as? String)?.isEmpty == false)
            let transports = answer["availableTransports"] as? [[String: Any]] ?? []
            #expect(
                transports.contains {
                    $0["transport"] as? String == "WebSockets"
                        && ($0["transferFormats"] as? [String])?.contains("Text") == true
                })
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
