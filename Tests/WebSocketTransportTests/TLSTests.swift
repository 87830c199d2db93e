import Foundation
import TestSupport
import Testing
import WebSocketTransport

/// wss:// against a real TLS server (Python websockets) with certificates made by openssl for the test.
@Suite(.serialized, .timeLimit(.minutes(1)), .enabled(if: PythonPeer.available, "needs .venv (make test) and openssl"))
struct TLSTests {
    @Test func untrustedCertificateIsRefusedByDefault() async throws {
        try await TLSPeer.with(hostName: "localhost") { port, _ in
            await #expect {
                _ = try await WebSocket.connect(to: URL(string: "wss://localhost:\(port)/")!)
            } throws: { error in
                (error as? WebSocketError)?.kind == .tls
            }
        }
    }

    @Test func trustedThroughTheCAFileItConnects() async throws {
        try await TLSPeer.with(hostName: "localhost") { port, certificate in
            var options = WebSocketOptions()
            options.caFile = certificate
            let ws = try await WebSocket.connect(to: URL(string: "wss://localhost:\(port)/")!, options: options)
            try ws.send(.text(Array("over TLS".utf8)))
            var it = ws.messages.makeAsyncIterator()
            #expect(try await it.next() == .text(Array("over TLS".utf8)))
            await ws.close()
        }
    }

    @Test func aCertificateForAnotherHostIsRefusedEvenWhenTrusted() async throws {
        try await TLSPeer.with(hostName: "other.example") { port, certificate in
            var options = WebSocketOptions()
            options.caFile = certificate
            await #expect {
                _ = try await WebSocket.connect(to: URL(string: "wss://localhost:\(port)/")!, options: options)
            } throws: { error in
                (error as? WebSocketError)?.kind == .tls
            }
        }
    }

    @Test func theInsecureTestSwitchSkipsTheChecks() async throws {
        try await TLSPeer.with(hostName: "other.example") { port, _ in
            var options = WebSocketOptions()
            options.allowInsecureTLS = true
            let ws = try await WebSocket.connect(to: URL(string: "wss://localhost:\(port)/")!, options: options)
            try ws.send(.binary([1, 2, 3]))
            var it = ws.messages.makeAsyncIterator()
            #expect(try await it.next() == .binary([1, 2, 3]))
            await ws.close()
        }
    }
}

enum TLSPeer {
    /// A self-signed certificate for `hostName`, a TLS echo server using it; `body` gets its port and the cert path.
    static func with(hostName: String, _ body: (Int, String) async throws -> Void) async throws {
        let certificate = try await SelfSignedCertificate(host: hostName)
        let server = try await PythonPeer(script: "tls_echo_server.py", arguments: [certificate.cert, certificate.key])
        defer { server.stop() }
        let port = try #require(Int(server.address))
        try await body(port, certificate.cert)
    }
}
