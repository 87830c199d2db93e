import Foundation
import Testing

@testable import RelayDaemon

/// The status endpoint's few lines of HTTP, on a real socket: what a monitoring agent or a stray client sends gets a
/// clear answer, one request at a time, and a stop ends the server.
@Suite struct StatusServerTests {
    /// A TCP connection to the server on loopback.
    private func connected(_ port: Int) throws -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        try #require(fd >= 0)
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = UInt16(port).bigEndian
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        let result = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        try #require(result == 0)
        return fd
    }

    /// Sends `request` as it is and reads the whole answer (the server closes after it).
    private func exchange(_ port: Int, _ request: [UInt8]) throws -> String {
        let fd = try connected(port)
        defer { close(fd) }
        _ = request.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        var answer: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n <= 0 { break }
            answer += buffer[..<n]
        }
        return String(decoding: answer, as: UTF8.self)
    }

    @Test func answersKnownPathsAndSaysWhatIsWrongWithTheRest() async throws {
        let server = try StatusServer(host: "127.0.0.1", port: 0)
        let serving = Task {
            await server.serve { request in
                request.path == "/healthz"
                    ? .init(status: 200, contentType: "application/json", body: #"{"status":"ok"}"#)
                    : .init(status: 404, contentType: "text/plain", body: "not found\n")
            }
        }
        let port = server.port
        #expect(port > 0)

        let ok = try exchange(port, Array("GET /healthz?verbose=1 HTTP/1.1\r\nHost: x\r\n\r\n".utf8))
        #expect(ok.hasPrefix("HTTP/1.1 200 OK\r\n"), "\(ok)")
        #expect(ok.contains("Content-Length: 15\r\n") && ok.hasSuffix("\r\n\r\n{\"status\":\"ok\"}"), "\(ok)")
        #expect(try exchange(port, Array("GET /nothing HTTP/1.1\r\n\r\n".utf8)).hasPrefix("HTTP/1.1 404 Not Found\r\n"))
        // Not a request line at all, and a head that never ends within the limit.
        #expect(try exchange(port, Array("hello there\r\n\r\n".utf8)).hasPrefix("HTTP/1.1 400 Bad Request\r\n"))
        let huge =
            Array("GET / HTTP/1.1\r\nX: ".utf8)
            + [UInt8](repeating: UInt8(ascii: "a"), count: StatusServer.maxHead + 10)
        #expect(try exchange(port, huge).hasPrefix("HTTP/1.1 431 "))
        // A client that connects and leaves without a word does not stop the next one.
        close(try connected(port))
        #expect(try exchange(port, Array("GET /healthz HTTP/1.0\r\n\r\n".utf8)).hasPrefix("HTTP/1.1 200 OK\r\n"))

        server.stop()
        await serving.value  // returns: the accept loop ended
    }

    @Test func aPortInUseIsAnErrorThatSaysSo() throws {
        let first = try StatusServer(host: "127.0.0.1", port: 0)
        defer { first.stop() }
        #expect {
            _ = try StatusServer(host: "127.0.0.1", port: first.port)
        } throws: { error in
            "\(error)".contains("in use")
        }
    }
}
