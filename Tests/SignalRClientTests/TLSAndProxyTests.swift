import Foundation
import SignalRClient
import SignalRProtocol
import TestSupport
import Testing

/// One TLS and proxy policy for every transport, against certificates made by openssl for the test, a TLS front for
/// the simulator (Tests/Interop/tls_front.py) and a CONNECT-only proxy (Tests/Interop/connect_proxy.py).
@Suite(.serialized, .timeLimit(.minutes(2)), .enabled(if: PythonPeer.available, "needs .venv (make test) and openssl"))
struct TLSAndProxyTests {
    /// A self-signed certificate for localhost: with the name in subjectAltName, or (as many home-lab guides still
    /// make them) in the Common Name only.
    static func certificate(subjectAltName: Bool) async throws -> (cert: String, key: String) {
        let made = try await SelfSignedCertificate(subjectAltName: subjectAltName)
        return (made.cert, made.key)
    }

    static let transports: [TransportKind] = [.webSockets, .serverSentEvents, .longPolling]

    func connection(_ base: URL, _ transport: TransportKind, ca: String, proxy: ProxyPolicy = .direct) -> HubConnection
    {
        HubConnection(
            url: hubURL(base),
            options: options {
                $0.transports = [transport]
                $0.webSocket.caFile = ca
                $0.webSocket.proxy = proxy
                $0.handshakeTimeout = .seconds(5)
            }, logger: quietLogger())
    }

    /// With the name in subjectAltName and the certificate given as the CA file, every transport connects over TLS.
    @Test(arguments: transports) func aProperCertificateWorksOnEveryTransport(_ transport: TransportKind) async throws {
        let (cert, key) = try await Self.certificate(subjectAltName: true)
        try await withSimulator { base in
            let front = try await PythonPeer(script: "tls_front.py", arguments: [cert, key, String(base.port!)])
            defer { front.stop() }
            let tls = URL(string: "https://localhost:\(front.address)")!
            let c = connection(tls, transport, ca: cert)
            let balances = Collector<Decimal>()
            await c.on("BalanceUpdated") { (args: HubArguments) in balances.append(try args.decode(1, as: Decimal.self))
            }
            try await c.start()
            #expect(await c.transport == transport)
            try await call(base, "POST", "/_sim/burst?count=2")
            #expect(await balances.wait(for: 2).count == 2)
            await c.stop()
        }
    }

    /// `allowInsecureTLS` takes a certificate nothing vouches for on every transport (negotiate included), and the start
    /// says so; without it, and without a CA file, the same certificate is refused.
    @Test(arguments: transports) func insecureTLSTakesAnyCertificateOnEveryTransportAndSaysSo(
        _ transport: TransportKind
    ) async throws {
        let (cert, key) = try await Self.certificate(subjectAltName: true)
        try await withSimulator { base in
            let front = try await PythonPeer(script: "tls_front.py", arguments: [cert, key, String(base.port!)])
            defer { front.stop() }
            let tls = hubURL(URL(string: "https://localhost:\(front.address)")!)
            let checked = HubConnection(
                url: tls,
                options: options {
                    $0.transports = [transport]
                    $0.handshakeTimeout = .seconds(5)
                }, logger: quietLogger())
            await #expect(throws: HubConnectionError.self, "a self-signed certificate, no CA file") {
                try await checked.start()
            }
            let lines = LogLines()
            let unchecked = HubConnection(
                url: tls,
                options: options {
                    $0.transports = [transport]
                    $0.handshakeTimeout = .seconds(5)
                    $0.webSocket.allowInsecureTLS = true
                }, logger: lines.logger(level: .warning))
            try await unchecked.start()
            #expect(await unchecked.transport == transport)
            #expect(
                lines.all.contains {
                    $0.hasPrefix(
                        "warning TLS certificate and host name checks are OFF for negotiate and every transport")
                },
                "\(lines.all)")
            await unchecked.stop()
        }
    }

    /// A certificate that names the host in its Common Name only is refused on every transport alike (curl alone
    /// would have taken it for negotiate, and the WebSocket then failed with "error:00000001:lib(0)::reason(1)"),
    /// with a message that says what is wrong and how to make one that works.
    @Test(arguments: transports) func aCommonNameOnlyCertificateIsRefusedWithAdvice(
        _ transport: TransportKind
    ) async throws {
        let (cert, key) = try await Self.certificate(subjectAltName: false)
        try await withSimulator { base in
            let front = try await PythonPeer(script: "tls_front.py", arguments: [cert, key, String(base.port!)])
            defer { front.stop() }
            let c = connection(URL(string: "https://localhost:\(front.address)")!, transport, ca: cert)
            do throws(HubConnectionError) {
                try await c.start()
                Issue.record("connected with a CN-only certificate over \(transport)")
            } catch {
                #expect(error.message.contains("names its host in the Common Name (CN) only"), "\(error.message)")
                #expect(error.message.contains("subjectAltName=DNS:localhost"))
            }
        }
    }

    /// The WebSocket alone (negotiation skipped) says the same.
    @Test func theWebSocketAloneGivesTheSameAdvice() async throws {
        let (cert, key) = try await Self.certificate(subjectAltName: false)
        try await withSimulator { base in
            let front = try await PythonPeer(script: "tls_front.py", arguments: [cert, key, String(base.port!)])
            defer { front.stop() }
            let c = HubConnection(
                url: hubURL(URL(string: "https://localhost:\(front.address)")!),
                options: options {
                    $0.skipNegotiation = true
                    $0.webSocket.caFile = cert
                }, logger: quietLogger())
            do throws(HubConnectionError) {
                try await c.start()
                Issue.record("connected with a CN-only certificate")
            } catch {
                #expect(error.message.contains("Common Name (CN) only"), "\(error.message)")
            }
        }
    }

    /// `https_proxy` is used by every transport (negotiate, the transport itself, sends), through CONNECT tunnels;
    /// `no_proxy` exempts them all alike.
    @Test(arguments: transports) func everyTransportGoesThroughTheSameProxy(_ transport: TransportKind) async throws {
        let (cert, key) = try await Self.certificate(subjectAltName: true)
        let log = FileManager.default.temporaryDirectory.appending(path: "proxy-\(UUID()).log").path
        #expect(FileManager.default.createFile(atPath: log, contents: nil))
        try await withSimulator { base in
            let front = try await PythonPeer(script: "tls_front.py", arguments: [cert, key, String(base.port!)])
            defer { front.stop() }
            let proxy = try await PythonPeer(script: "connect_proxy.py", arguments: [log])
            defer { proxy.stop() }
            let target = "localhost:\(front.address)"
            let through = ProxyPolicy(environment: ["https_proxy": "http://127.0.0.1:\(proxy.address)"])
            let c = connection(URL(string: "https://\(target)")!, transport, ca: cert, proxy: through)
            let balances = Collector<Decimal>()
            await c.on("BalanceUpdated") { (args: HubArguments) in balances.append(try args.decode(1, as: Decimal.self))
            }
            try await c.start()
            _ = try await c.invoke("Echo", [.string("through the tunnel")])
            try await call(base, "POST", "/_sim/burst?count=1")
            #expect(await balances.wait(for: 1).count == 1)
            await c.stop()
            let tunnels = try String(contentsOfFile: log, encoding: .utf8).split(separator: "\n")
            #expect(tunnels.count >= 2, "negotiate and the transport: \(tunnels)")
            #expect(tunnels.allSatisfy { $0 == "CONNECT \(target)" }, "\(tunnels)")

            // Exempted by no_proxy: nothing goes through the proxy. A proxy of its own, so that a tunnel the first
            // connection asked for just before it stopped (a long poll) cannot be counted against this one.
            let exemptLog = FileManager.default.temporaryDirectory.appending(path: "proxy-\(UUID()).log").path
            #expect(FileManager.default.createFile(atPath: exemptLog, contents: nil))
            let unused = try await PythonPeer(script: "connect_proxy.py", arguments: [exemptLog])
            defer { unused.stop() }
            let exempt = ProxyPolicy(environment: [
                "https_proxy": "http://127.0.0.1:\(unused.address)", "no_proxy": "example.org,localhost",
            ])
            let direct = connection(URL(string: "https://\(target)")!, transport, ca: cert, proxy: exempt)
            try await direct.start()
            _ = try await direct.invoke("Echo", [.string("straight to the hub")])
            await direct.stop()
            #expect(try String(contentsOfFile: exemptLog, encoding: .utf8).isEmpty)
        }
    }
}

@Suite struct ProxyPolicyTests {
    @Test func schemesPickTheirProxyAndNoProxyExempts() {
        let p = ProxyPolicy(environment: [
            "https_proxy": "http://user:pw@secure.proxy:3128", "http_proxy": "plain.proxy:8080",
            "no_proxy": ".internal, example.org",
        ])
        #expect(
            p.proxy(for: URL(string: "https://hub.example.com/hubs/family")!)?.url == "http://user:pw@secure.proxy:3128"
        )
        #expect(p.proxy(for: URL(string: "wss://hub.example.com/hubs/family")!)?.address == "user:pw@secure.proxy:3128")
        #expect(p.proxy(for: URL(string: "ws://hub.example.com/")!)?.address == "plain.proxy:8080")
        #expect(p.proxy(for: URL(string: "https://example.org/")!) == nil)
        #expect(p.proxy(for: URL(string: "https://api.example.org/")!) == nil, "subdomains too")
        #expect(p.proxy(for: URL(string: "https://box.internal/")!) == nil)
        #expect(p.proxy(for: URL(string: "https://notexample.org/")!) != nil, "a suffix is not a subdomain")
    }

    @Test func upperCaseNamesAllProxyAndWhatIsNotUsed() {
        #expect(ProxyPolicy(environment: ["HTTPS_PROXY": "p:1"]).proxy(for: URL(string: "https://h/")!)?.port == 1)
        #expect(
            ProxyPolicy(environment: ["HTTP_PROXY": "p:1"]).proxy(for: URL(string: "http://h/")!) == nil,
            "HTTP_PROXY can come from a CGI request")
        #expect(ProxyPolicy(environment: ["all_proxy": "p:2"]).proxy(for: URL(string: "http://h/")!)?.port == 2)
        #expect(
            ProxyPolicy(environment: ["https_proxy": "socks5://p:1080"]).proxy(for: URL(string: "https://h/")!) == nil)
        #expect(
            ProxyPolicy(environment: ["https_proxy": "p:1", "NO_PROXY": "*"]).proxy(for: URL(string: "https://h/")!)
                == nil)
    }
}
