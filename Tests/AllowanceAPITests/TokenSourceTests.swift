import AllowanceAPI
import Foundation
import SignalRProtocol
import TestSupport
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Email + password login against the simulator's real login endpoint.
@Suite struct LoginSessionTests {
    private func session(_ base: URL, password: String = "allowance") -> LoginSession {
        LoginSession(baseURL: base, email: "parent@example.com") { Secret(password) }
    }

    private func logins(_ base: URL) async throws -> Int {
        try await simStats(base)["logins"] ?? -1
    }

    @Test func oneLoginServesManyCallersUntilFiveMinutesBeforeExpiry() async throws {
        try await withSimulator(token: "unused") { base in
            let tokens = session(base)
            async let a = tokens.token()
            async let b = tokens.token()
            let (first, second) = try await (a, b)
            #expect(first != nil && first == second)
            #expect(try await tokens.token() == first)
            #expect(try await logins(base) == 1)
            let expiry = try #require(await tokens.expiresAt)
            #expect(expiry.timeIntervalSinceNow > 3000, "the simulator's tokens live an hour")
        }
    }

    @Test func aTokenCloseToExpiryIsRenewedBeforeUse() async throws {
        // Tokens that live 4 minutes are always inside the 5-minute margin: every use logs in anew.
        try await withSimulator(token: "unused", { $0.tokenLifetime = .seconds(240) }) { base in
            let tokens = session(base)
            let first = try await tokens.token()
            let second = try await tokens.token()
            #expect(first != second)
            #expect(try await logins(base) == 2)
        }
    }

    @Test func aRefusedTokenIsReplacedOnceAndTheCallSucceeds() async throws {
        try await withSimulator(token: "unused") { base in
            let tokens = session(base)
            let api = APIClient(baseURL: base, tokens: tokens)
            #expect(try await api.children().count == 3)
            var revoke = URLRequest(url: base.appending(path: "_sim/revoke"))
            revoke.httpMethod = "POST"
            _ = try await TestHTTP.data(for: revoke)
            #expect(try await api.children().count == 3, "the 401 led to one new login")
            #expect(try await logins(base) == 2)
        }
    }

    @Test func aWrongPasswordSaysWhatToCheckWithoutTheSecret() async throws {
        try await withSimulator(token: "unused") { base in
            let tokens = session(base, password: "hunter2-wrong")
            do {
                _ = try await tokens.token()
                Issue.record("a wrong password was accepted")
            } catch let error as APIError {
                #expect(error.kind == .unauthorized)
                #expect(error.message.contains("parent@example.com") && error.message.contains("server.email"))
                #expect(!error.message.contains("hunter2"))
            }
        }
    }
}
