import Foundation
import Synchronization

/// The few lines of HTTP/1.1 that the family page, `/healthz` and `/metrics` need, on a POSIX socket and one thread of its own.
///
/// A monitoring endpoint answers a scrape every few seconds: one request at a time, each closed after its answer,
/// is all it takes. A full HTTP server (Hummingbird on SwiftNIO) made a third of the relay's code and its event
/// loop threads, resident in every relay whether the endpoint was on or not.
final class StatusServer: Sendable {
    struct Request: Sendable {
        let method: String
        let path: String
        /// The `Authorization` header's value, if any.
        var authorization: String? = nil
    }

    struct Response: Sendable {
        var status: Int
        var contentType: String
        var body: String
        /// Further headers (a 401's `WWW-Authenticate`).
        var headers: [(String, String)] = []
    }

    /// Bound and listening, or the reason it could not be.
    private let fd: Int32
    private let closed = Mutex(false)
    /// A request's head larger than this is refused (431); a client silent this long is dropped.
    static let maxHead = 16 * 1024
    static let readTimeout: Int = 5

    /// Binds `host:port` (a name is resolved; the first address that binds is kept) and listens.
    init(host: String, port: Int) throws(DaemonError) {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        hints.ai_flags = AI_PASSIVE
        var list: UnsafeMutablePointer<addrinfo>?
        let found = getaddrinfo(host, String(port), &hints, &list)
        guard found == 0, let first = list else {
            throw DaemonError(exitCode: 1, message: "cannot resolve \(host): \(String(cString: gai_strerror(found)))")
        }
        defer { freeaddrinfo(list) }
        var lastError = "no address"
        var info: UnsafeMutablePointer<addrinfo>? = first
        while let ai = info {
            info = ai.pointee.ai_next
            let s = socket(
                ai.pointee.ai_family, ai.pointee.ai_socktype | Int32(SOCK_CLOEXEC.rawValue), ai.pointee.ai_protocol)
            guard s >= 0 else {
                lastError = String(cString: strerror(errno))
                continue
            }
            var on: Int32 = 1
            setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &on, socklen_t(MemoryLayout<Int32>.size))
            if bind(s, ai.pointee.ai_addr, ai.pointee.ai_addrlen) == 0, listen(s, 16) == 0 {
                fd = s
                return
            }
            lastError = String(cString: strerror(errno))
            close(s)
        }
        throw DaemonError(exitCode: 1, message: lastError)
    }

    /// The port it listens on (the one asked for, or the one the system chose for 0).
    var port: Int {
        var address = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        let port = withUnsafePointer(to: &address) { p -> UInt16 in
            // the same place in sockaddr_in6
            p.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { $0.pointee.sin_port }
        }
        return Int(UInt16(bigEndian: port))
    }

    /// Answers requests with `handle` on a thread of its own until `stop()`; returns when that thread has ended.
    func serve(_ handle: @escaping @Sendable (Request) -> Response) async {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
                let thread = Thread { [self] in
                    acceptLoop(handle)
                    done.resume()
                }
                thread.name = "status-endpoint"
                thread.start()
            }
        } onCancel: {
            stop()
        }
    }

    /// Wakes the accept loop (shutdown makes a blocked accept return) and ends it. Safe to call more than once.
    func stop() {
        let first = closed.withLock { c in
            defer { c = true }
            return !c
        }
        if first { shutdown(fd, Int32(SHUT_RDWR)) }
    }

    private func acceptLoop(_ handle: (Request) -> Response) {
        defer { close(fd) }
        while !closed.withLock({ $0 }) {
            let client = accept(fd, nil, nil)
            if client < 0 {
                if errno == EINTR || errno == ECONNABORTED || errno == EMFILE || errno == ENFILE { continue }
                return  // shut down
            }
            _ = fcntl(client, F_SETFD, FD_CLOEXEC)  // a link opened by xdg-open must not inherit it
            answer(client, handle)
            close(client)
        }
    }

    private func answer(_ client: Int32, _ handle: (Request) -> Response) {
        var timeout = timeval(tv_sec: Self.readTimeout, tv_usec: 0)
        setsockopt(client, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(client, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        let response: Response
        switch Self.readHead(client) {
        case .head(let head):
            response =
                Self.parse(head).map(handle) ?? Response(status: 400, contentType: "text/plain", body: "bad request\n")
        case .tooLarge:
            response = Response(status: 431, contentType: "text/plain", body: "request header fields too large\n")
        case .gone:
            return
        }
        write(client, Self.serialize(response))
    }

    private static let blankLine: [UInt8] = [13, 10, 13, 10]

    private enum Head {
        case head([UInt8])
        case tooLarge
        case gone
    }

    /// Reads until the blank line that ends a request's head.
    private static func readHead(_ client: Int32) -> Head {
        var head: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = chunk.withUnsafeMutableBytes { recv(client, $0.baseAddress, $0.count, 0) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { return .gone }
            // The blank line can only end in what just came (or straddle the three bytes before it).
            let from = max(0, head.count - 3)
            head += chunk[..<n]
            if head[from...].firstRange(of: Self.blankLine) != nil { return .head(head) }
            if head.count > maxHead { return .tooLarge }
        }
    }

    /// The request line: `METHOD /path[?query] HTTP/1.x`; nil when it is not one.
    static func parse(_ head: [UInt8]) -> Request? {
        guard let end = head.firstIndex(of: 13) else { return nil }
        let parts = head[..<end].split(separator: 32, omittingEmptySubsequences: false)
        guard parts.count == 3, parts[2].starts(with: Array("HTTP/1.".utf8)), parts[1].first == UInt8(ascii: "/") else {
            return nil
        }
        let target = String(decoding: parts[1], as: UTF8.self)
        // The one header read: a line `Authorization: value`, the name in any case.
        let lines = String(decoding: head, as: UTF8.self).split(separator: "\r\n").dropFirst()
        let authorization = lines.first { $0.lowercased().hasPrefix("authorization:") }.map {
            $0.dropFirst("authorization:".count).trimmingCharacters(in: .whitespaces)
        }
        return Request(
            method: String(decoding: parts[0], as: UTF8.self), path: String(target.prefix { $0 != "?" }),
            authorization: authorization)
    }

    static func serialize(_ r: Response) -> [UInt8] {
        let reason =
            switch r.status {
            case 200: "OK"
            case 401: "Unauthorized"
            case 400: "Bad Request"
            case 404: "Not Found"
            case 405: "Method Not Allowed"
            case 431: "Request Header Fields Too Large"
            case 503: "Service Unavailable"
            default: "Status"
            }
        let body = Array(r.body.utf8)
        let head =
            "HTTP/1.1 \(r.status) \(reason)\r\nContent-Type: \(r.contentType)\r\nContent-Length: \(body.count)\r\n"
            + r.headers.map { "\($0.0): \($0.1)\r\n" }.joined() + "Connection: close\r\nServer: allowance-relay\r\n\r\n"
        return Array(head.utf8) + body
    }

    private func write(_ client: Int32, _ bytes: [UInt8]) {
        var sent = 0
        while sent < bytes.count {
            let n = bytes[sent...].withUnsafeBytes { send(client, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { return }
            sent += n
        }
    }
}
