import AllowanceAPI
import Config
import Foundation
import Testing

@testable import RelayDaemon

/// Who may see the family page: a loopback address without a token; any other only with one, asked as Bearer or
/// as Basic's password (a browser's login prompt).
@Suite struct StatusAuthTests {
    let token = Secret("s3cret-family")

    func basic(_ pair: String) -> String { "Basic " + Data(pair.utf8).base64EncodedString() }

    @Test func theTokenIsTakenAsBearerOrAsBasicsPasswordAndNothingElse() {
        #expect(StatusEndpoint.authorized("Bearer s3cret-family", token: token))
        #expect(StatusEndpoint.authorized("bearer s3cret-family", token: token), "the scheme in any case")
        #expect(StatusEndpoint.authorized(basic("parent:s3cret-family"), token: token))
        #expect(StatusEndpoint.authorized(basic(":s3cret-family"), token: token), "any user, even none")
        #expect(!StatusEndpoint.authorized(nil, token: token))
        #expect(!StatusEndpoint.authorized("Bearer s3cret-famil", token: token), "a prefix is not the token")
        #expect(!StatusEndpoint.authorized("Bearer s3cret-family2", token: token))
        #expect(!StatusEndpoint.authorized(basic("s3cret-family"), token: token), "Basic without a password")
        #expect(!StatusEndpoint.authorized("Token s3cret-family", token: token))
        #expect(!StatusEndpoint.authorized("Basic !!!", token: token))
    }

    func problems(_ status: [String: String]) async -> [String] {
        var env = ["ALLOWANCE_RELAY_SERVER_URL": "http://127.0.0.1:5000", "ALLOWANCE_RELAY_SERVER_TOKEN": "t"]
        for (k, v) in status { env["ALLOWANCE_RELAY_STATUS_" + k.uppercased()] = v }
        do {
            _ = try await RelaySettings.load(file: nil, environment: env)
            return []
        } catch {
            return error.all.map { "\($0)" }
        }
    }

    @Test func listeningBeyondLoopbackNeedsAToken() async {
        #expect(await problems(["listen": "127.0.0.1:9464"]).isEmpty)
        #expect(await problems(["listen": "9464"]).isEmpty, "the host defaults to loopback")
        let open = await problems(["listen": "0.0.0.0:9464"])
        #expect(
            open.count == 1 && open[0].contains("0.0.0.0:9464") && open[0].contains("status.token_file"), "\(open)")
        #expect(await problems(["listen": "0.0.0.0:9464", "token": "s3cret"]).isEmpty)
    }
}
