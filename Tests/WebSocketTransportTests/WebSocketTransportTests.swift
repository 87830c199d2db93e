import Foundation
import Hummingbird
import HummingbirdWebSocket
import Logging
import NIOCore
import TestSupport
import Testing
import WebSocketTransport

/// A real WebSocket server (Hummingbird, SwiftNIO: a different stack from ours) on 127.0.0.1 and a free port.
func withTestServer(_ body: (Int) async throws -> Void) async throws {
    let ws = Router(context: BasicWebSocketRequestContext.self)
    ws.ws("/echo") { _, _ in
        .upgrade()
    } onUpgrade: { inbound, outbound, _ in
        for try await message in inbound.messages(maxSize: 8 << 20) {
            switch message {
            case .text(let s): try await outbound.write(.text(s))
            case .binary(let b): try await outbound.write(.binary(b))
            }
        }
    }
    ws.ws("/headers") { _, _ in
        .upgrade()
    } onUpgrade: { _, outbound, context in
        let h = context.request.headers
        let auth = h[.authorization] ?? "-"
        let agent = h[.userAgent] ?? "-"
        let custom = h.first { $0.name.canonicalName == "x-custom" }?.value ?? "-"
        try await outbound.write(.text("\(auth)|\(agent)|\(custom)"))
    }
    ws.ws("/host") { _, _ in
        .upgrade()
    } onUpgrade: { _, outbound, context in
        try await outbound.write(
            .text("\(context.request.head.authority ?? "-")|\(context.request.headers[.origin] ?? "-")"))
    }
    ws.ws("/big") { _, _ in
        .upgrade()
    } onUpgrade: { _, outbound, context in
        let size = Int(context.request.uri.queryParameters["size"] ?? "0") ?? 0
        try await outbound.write(.binary(ByteBuffer(repeating: 0x41, count: size)))
        try await Task.sleep(for: .seconds(5))
    }
    ws.ws("/fragments") { _, _ in
        .upgrade()
    } onUpgrade: { _, outbound, _ in
        try await outbound.write(.custom(.init(fin: false, opcode: .text, data: ByteBuffer(string: "Hello, "))))
        try await outbound.write(.custom(.init(fin: false, opcode: .continuation, data: ByteBuffer(string: "frag"))))
        try await outbound.write(
            .custom(.init(fin: true, opcode: .continuation, data: ByteBuffer(string: "mented world"))))
        try await outbound.write(.binary(ByteBuffer(bytes: [0, 1, 2, 255])))
        try await Task.sleep(for: .seconds(5))
    }
    ws.ws("/close") { _, _ in
        .upgrade()
    } onUpgrade: { _, outbound, _ in
        try await outbound.write(.text("bye soon"))
        try await outbound.close(.init(codeNumber: 4000), reason: "see you")
    }
    ws.ws("/burst") { _, _ in
        .upgrade()
    } onUpgrade: { _, outbound, context in
        let n = Int(context.request.uri.queryParameters["n"] ?? "0") ?? 0
        for i in 0..<n { try await outbound.write(.text("\(i)")) }
        try await outbound.close(.normalClosure, reason: "done")
    }
    let http = Router()
    http.get("/denied") { _, _ -> Response in Response(status: .unauthorized) }

    let (stream, cont) = AsyncStream<Int>.makeStream()
    var logger = Logger(label: "test-server")
    logger.logLevel = .error
    let app = Application(
        router: http,
        server: .http1WebSocketUpgrade(webSocketRouter: ws),
        configuration: .init(address: .hostname("127.0.0.1", port: 0)),
        onServerRunning: { cont.yield($0.localAddress!.port!) },
        logger: logger
    )
    try await withThrowingTaskGroup(of: Void.self) { group in
        group.addTask { try await app.runService(gracefulShutdownSignals: []) }
        var it = stream.makeAsyncIterator()
        let port = await it.next()!
        defer { group.cancelAll() }
        try await body(port)
    }
}

private func url(_ port: Int, _ path: String) -> URL { URL(string: "ws://127.0.0.1:\(port)\(path)")! }

@Suite(.serialized, .timeLimit(.minutes(1))) struct WebSocketTransportTests {
    @Test func echoesTextAndBinaryInOrder() async throws {
        try await withTestServer { port in
            let ws = try await WebSocket.connect(to: url(port, "/echo"))
            for i in 0..<100 { try ws.send(.text(Array("m\(i)".utf8))) }
            try ws.send(.binary([0, 0x1E, 0xFF]))
            var got: [WebSocketTransport.WebSocketMessage] = []
            for try await m in ws.messages {
                got.append(m)
                if got.count == 101 { break }
            }
            #expect(got.prefix(100).map { String(decoding: $0.bytes, as: UTF8.self) } == (0..<100).map { "m\($0)" })
            #expect(got.last == .binary([0, 0x1E, 0xFF]))
            await ws.close()
        }
    }

    @Test func sendsRequestHeaders() async throws {
        try await withTestServer { port in
            var options = WebSocketOptions()
            options.headers = [("Authorization", "Bearer abc"), ("User-Agent", "relay-test/1"), ("X-Custom", "yes")]
            let ws = try await WebSocket.connect(to: url(port, "/headers"), options: options)
            var it = ws.messages.makeAsyncIterator()
            let m = try await it.next()
            #expect(m == .text(Array("Bearer abc|relay-test/1|yes".utf8)))
            await ws.close()
        }
    }

    /// Host and Origin name the port when it is not the default (a server behind a proxy routes on it).
    @Test func hostAndOriginCarryTheNonDefaultPort() async throws {
        try await withTestServer { port in
            let ws = try await WebSocket.connect(to: url(port, "/host"))
            var it = ws.messages.makeAsyncIterator()
            let got = try await it.next()
            #expect(
                got == .text(Array("127.0.0.1:\(port)|http://127.0.0.1:\(port)".utf8)), "\(String(describing: got))")
            await ws.close()
        }
    }

    /// A token with a line break (from a file, or from a server) must not add headers of its own.
    @Test func aHeaderValueWithALineBreakIsRefusedBeforeAnythingIsSent() async throws {
        try await withTestServer { port in
            var options = WebSocketOptions()
            options.headers = [("Authorization", "Bearer abc\r\nX-Injected: yes")]
            await #expect { try await WebSocket.connect(to: url(port, "/headers"), options: options) } throws: {
                "\($0)"
                    == "The request header 'Authorization' holds a line break or another control character: refused."
            }
        }
    }

    @Test func reassemblesFragmentsAndKeepsTheOpcode() async throws {
        try await withTestServer { port in
            let ws = try await WebSocket.connect(to: url(port, "/fragments"))
            var it = ws.messages.makeAsyncIterator()
            #expect(try await it.next() == .text(Array("Hello, fragmented world".utf8)))
            #expect(try await it.next() == .binary([0, 1, 2, 255]))
            await ws.close()
        }
    }

    @Test func largeMessageWithinTheLimitArrivesWhole() async throws {
        try await withTestServer { port in
            let ws = try await WebSocket.connect(to: url(port, "/big?size=900000"))
            var it = ws.messages.makeAsyncIterator()
            let m = try await it.next()
            #expect(m?.bytes.count == 900_000)
            await ws.close()
        }
    }

    @Test func messageOverTheLimitIsRefusedWith1009() async throws {
        try await withTestServer { port in
            var options = WebSocketOptions()
            options.maxMessageSize = 100_000
            let ws = try await WebSocket.connect(to: url(port, "/big?size=200000"), options: options)
            var it = ws.messages.makeAsyncIterator()
            do {
                _ = try await it.next()
                Issue.record("expected messageTooLarge")
            } catch let error as WebSocketError {
                #expect(error.kind == .messageTooLarge)
                #expect(error.message.contains("100000-byte limit"))
            }
            await ws.close()
        }
    }

    @Test func peerCloseEndsIterationWithCodeAndReason() async throws {
        try await withTestServer { port in
            let ws = try await WebSocket.connect(to: url(port, "/close"))
            var got: [WebSocketTransport.WebSocketMessage] = []
            for try await m in ws.messages { got.append(m) }
            #expect(got == [.text(Array("bye soon".utf8))])
            #expect(ws.closeInfo == WebSocketClose(code: 4000, reason: "see you"))
            await ws.close()
        }
    }

    @Test func backPressurePausesReadingWithoutLosingMessages() async throws {
        try await withTestServer { port in
            var options = WebSocketOptions()
            options.receiveBufferMessages = 16
            let ws = try await WebSocket.connect(to: url(port, "/burst?n=5000"), options: options)
            // Nobody reads yet: the burst fills the 16-message buffer, and the connection stops reading the socket.
            let deadline = ContinuousClock.now + .seconds(10)
            while !ws.messages.isHoldingBack && ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(5))
            }
            #expect(ws.messages.isHoldingBack, "reading stopped at the high-water mark")
            // What waits is what one round of reading brought past the mark, not the burst: the rest is in TCP.
            let waiting = ws.messages.waiting
            #expect(waiting >= 16 && waiting < 5000, "\(waiting) messages waiting")
            var expected = 0
            for try await m in ws.messages {
                #expect(String(decoding: m.bytes, as: UTF8.self) == "\(expected)")
                expected += 1
            }
            #expect(expected == 5000)
            #expect(!ws.messages.isHoldingBack, "reading resumed as the reader took them")
            await ws.close()
        }
    }

    @Test func closeSendsCodeAndReasonAndSendAfterCloseFails() async throws {
        try await withTestServer { port in
            let ws = try await WebSocket.connect(to: url(port, "/echo"))
            await ws.close(code: 1000, reason: "shutting down")
            #expect(ws.closeInfo?.code == 1000)
            #expect(throws: WebSocketError.self) { try ws.send(.text([1])) }
        }
    }

    @Test(arguments: [401, 403, 404, 409, 503])
    func upgradeRefusalCarriesTheHTTPStatus(_ status: Int) async throws {
        let server = try CannedHTTPListener(status: status)
        defer { server.stop() }
        await #expect {
            _ = try await WebSocket.connect(to: url(server.port, "/hub"))
        } throws: { error in
            guard let e = error as? WebSocketError else { return false }
            return e.kind == .upgradeRejected(status: status) && e.message.contains("HTTP \(status)")
        }
    }

    @Test func refusedConnectionIsTyped() async throws {
        // A port that was free a moment ago: nothing listens there.
        let port = try freePort()
        await #expect {
            _ = try await WebSocket.connect(to: url(port, "/"))
        } throws: { error in
            guard let e = error as? WebSocketError else { return false }
            return e.kind == .connectionRefused && e.message.contains("127.0.0.1:\(port)")
        }
    }

    @Test func unknownHostIsADNSFailure() async throws {
        await #expect {
            _ = try await WebSocket.connect(to: URL(string: "ws://no-such-host.invalid/")!)
        } throws: { error in
            (error as? WebSocketError)?.kind == .dnsFailure
        }
    }

    @Test func rejectsNonWebSocketURLs() async throws {
        await #expect(throws: WebSocketError(.invalidURL, "'http://x/' is not a ws:// or wss:// URL.")) {
            _ = try await WebSocket.connect(to: URL(string: "http://x/")!)
        }
    }

    @Test func silentServerTimesOut() async throws {
        // A TCP listener that accepts and never answers the upgrade.
        let listener = try SilentListener()
        var options = WebSocketOptions()
        options.connectTimeout = .seconds(2)
        let started = ContinuousClock.now
        await #expect {
            _ = try await WebSocket.connect(to: url(listener.port, "/"), options: options)
        } throws: { error in
            (error as? WebSocketError)?.kind == .timeout
        }
        // It must not hang. The bound is loose because the deadline's timer can wake late while the suites run side
        // by side on two cores (12.6 s was seen for this 2 s deadline under that load).
        #expect(ContinuousClock.now - started < .seconds(20))
        listener.stop()
    }
}

func freePort() throws -> Int {
    let l = try SilentListener()
    let p = l.port
    l.stop()
    return p
}

/// A plain TCP socket that listens on 127.0.0.1 and never says anything.
final class SilentListener: @unchecked Sendable {
    let fd: Int32
    let port: Int

    init() throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        self.fd = fd
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        addr.sin_port = 0
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, len) } }
        listen(fd, 8)
        _ = withUnsafeMutablePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &len) }
        }
        port = Int(UInt16(bigEndian: addr.sin_port))
    }

    func stop() { close(fd) }
}

/// Answers every connection with one canned HTTP status instead of an upgrade (as a server that refuses
/// the token, the path or a second socket does).
final class CannedHTTPListener: @unchecked Sendable {
    private let listener: SilentListener
    private let exited = DispatchSemaphore(value: 0)
    var port: Int { listener.port }

    init(status: Int) throws {
        listener = try SilentListener()
        let fd = listener.fd
        let exited = self.exited
        Thread {
            defer { exited.signal() }
            while true {
                let client = accept(fd, nil, nil)
                if client < 0 { return }
                var buffer = [UInt8](repeating: 0, count: 4096)
                _ = read(client, &buffer, buffer.count)
                let response = "HTTP/1.1 \(status) Refused\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                _ = response.withCString { write(client, $0, strlen($0)) }
                close(client)
            }
        }.start()
    }

    /// Stops accepting, and closes the socket only once the accept thread is gone (or its descriptor
    /// number, reused by the next listener, would still be served by this one).
    func stop() {
        shutdown(listener.fd, Int32(SHUT_RDWR))
        exited.wait()
        listener.stop()
    }
}

@Suite(.serialized, .timeLimit(.minutes(1))) struct WebSocketLifecycleTests {
    /// /proc files say their size is 0, so Foundation's whole-file readers return nothing: read until EOF.
    private func readProcFile(_ path: String) -> String {
        let fd = open(path, O_RDONLY)
        guard fd >= 0 else { return "" }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = read(fd, &chunk, chunk.count)
            if n <= 0 { break }
            bytes += chunk[0..<n]
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Service threads of connections to `port` (named lws-<port>; other suites run in parallel).
    private func serviceThreads(to port: Int) -> Int {
        ProcessThreads.names().filter { $0 == "lws-\(port)" }.count
    }

    /// Open descriptors of this process that are TCP sockets connected to `port` (our client ends).
    private func clientSockets(to port: Int) -> Int {
        let portHex = String(format: "%04X", port)
        let table = readProcFile("/proc/net/tcp")
        let inodes = Set(
            table.split(separator: "\n").dropFirst().compactMap { line -> String? in
                let f = line.split(separator: " ", omittingEmptySubsequences: true)
                guard f.count > 9, f[2].hasSuffix(":" + portHex) else { return nil }
                return String(f[9])
            })
        let fds = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
        return fds.filter { fd in
            guard let target = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\(fd)"),
                target.hasPrefix("socket:[")
            else { return false }
            return inodes.contains(String(target.dropFirst(8).dropLast()))
        }.count
    }

    /// Every connection has its own service thread, context and socket: after close, none of them remain.
    @Test func closeLeavesNoThreadOrSocketBehind() async throws {
        try await withTestServer { port in
            var open: [WebSocket] = []
            for _ in 0..<5 {
                open.append(try await WebSocket.connect(to: URL(string: "ws://127.0.0.1:\(port)/echo")!))
            }
            #expect(serviceThreads(to: port) == 5, "the probe sees live service threads")
            #expect(clientSockets(to: port) == 5, "the probe sees live client sockets")
            for ws in open { await ws.close() }
            for _ in 0..<20 {
                let ws = try await WebSocket.connect(to: URL(string: "ws://127.0.0.1:\(port)/echo")!)
                try ws.send(.text(Array("x".utf8)))
                var it = ws.messages.makeAsyncIterator()
                _ = try await it.next()
                await ws.close()
            }
            // A closed connection's thread returns just after `close()` does: a leak stays, an exiting thread goes.
            for _ in 0..<100 where serviceThreads(to: port) + clientSockets(to: port) > 0 {
                try await Task.sleep(for: .milliseconds(50))
            }
            #expect(serviceThreads(to: port) == 0, "service threads left after 25 connections")
            #expect(clientSockets(to: port) == 0, "client sockets left after 25 connections")
        }
    }
}

@Suite struct RedactionTests {
    /// Logs show where the relay connects, never the query (tokens) or credentials, and read as typed: the
    /// ellipsis was once percent-encoded into "%E2%80%A6".
    @Test func aURLInTheLogsKeepsItsPlaceAndDropsQueryAndCredentials() {
        let url = URL(
            string:
                "https://pat:hunter2@allowance.example.org:8443/hubs/family/negotiate?negotiateVersion=1&access_token=abc"
        )!
        #expect(url.redactedForLogs == "https://allowance.example.org:8443/hubs/family/negotiate?…")
        #expect(URL(string: "wss://h.example/hubs/family")!.redactedForLogs == "wss://h.example/hubs/family")
    }
}
