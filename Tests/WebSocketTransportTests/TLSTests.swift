import Foundation
import Testing
import TestSupport
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
        let dir = FileManager.default.temporaryDirectory.appending(path: "tls-\(UUID())")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let cert = dir.appending(path: "cert.pem").path
        let key = dir.appending(path: "key.pem").path
        try run("/usr/bin/openssl", [
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert, "-days", "1",
            "-subj", "/CN=\(hostName)", "-addext", "subjectAltName=DNS:\(hostName)",
        ])
        let server = try PythonPeer(script: "tls_echo_server.py", arguments: [cert, key])
        defer { server.stop() }
        let port = try #require(Int(server.address))
        try await body(port, cert)
    }

    private static func run(_ tool: String, _ args: [String]) throws {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: tool)
        p.arguments = args
        p.standardOutput = FileHandle.nullDevice
        p.standardError = FileHandle.nullDevice
        try p.run()
        p.waitUntilExit()
        try #require(p.terminationStatus == 0, "\(tool) failed")
    }
}
