import Foundation
import HTTPTransport
import TestSupport
import Testing

/// Whom a TLS peer must prove to be, on the client every REST call and sink uses: the system's authorities refuse a
/// self-signed certificate, the CA file that issued it is taken, and `insecure` (the `server.insecure_tls` setting)
/// takes anything.
@Suite(.serialized, .enabled(if: PythonPeer.available, "needs .venv (make test) and openssl"))
struct HTTPTrustTests {
    @Test func eachTrustTakesWhatItShouldAndRefusesTheRest() async throws {
        let made = try await SelfSignedCertificate(subjectAltName: true)
        let receiver = WebhookReceiver()
        try await receiver.run { base in
            let front = try await PythonPeer(
                script: "tls_front.py", arguments: [made.cert, made.key, String(base.port!)])
            defer { front.stop() }
            let url = URL(string: "https://localhost:\(front.address)/api/v1/children")!
            do throws(HTTPError) {
                _ = try await HTTPClient.shared.send(HTTPRequest(.get, url, timeout: .seconds(5)))
                Issue.record("a self-signed certificate was taken with the system's authorities")
            } catch {
                #expect(error.kind == .tls, "\(error)")
            }
            #expect(
                try await HTTPClient.shared.send(
                    HTTPRequest(.get, url, timeout: .seconds(5), trust: .caFile(made.cert))
                ).status == 200)
            #expect(
                try await HTTPClient.shared.send(HTTPRequest(.get, url, timeout: .seconds(5), trust: .insecure)).status
                    == 200)
            #expect(receiver.received.count == 2, "only the trusted requests reached the server")
        }
    }
}
