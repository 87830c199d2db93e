import Core
import Foundation
import Synchronization

/// One HTTP request, as every part of the relay sends it: negotiate, the REST API and every webhook.
public struct HTTPRequest: Sendable {
    public enum Method: String, Sendable {
        case get = "GET"
        case post = "POST"
        case put = "PUT"
        case patch = "PATCH"
        case delete = "DELETE"
    }

    /// Whom the TLS peer must prove to be.
    public enum Trust: Sendable, Equatable {
        /// The system's certificate authorities (the default).
        case system
        /// The authorities in this PEM file (a private CA), instead of the system's.
        case caFile(String)
        /// No check at all: tests and a user's explicit `insecure_tls` only.
        case insecure

        /// From a configuration's two settings: no check wins, then a CA file, else the system's.
        public init(caFile: String?, insecure: Bool) {
            self = insecure ? .insecure : caFile.map { .caFile($0) } ?? .system
        }
    }

    public var method: Method
    public var url: URL
    public private(set) var headers: [(name: String, value: String)] = []
    public var body: [UInt8]
    /// The whole exchange (connect, send, answer) ends by then.
    public var timeout: Duration
    /// A longer answer is cut off and the request fails (`HTTPError.Kind.tooLarge`): a hostile or broken peer
    /// must not make the relay hold its whole body.
    public var maxResponseBytes: Int
    public var trust: Trust
    /// A new connection, closed afterwards: for a request that must not land on a kept-alive connection that a
    /// network cut killed without anyone knowing (negotiate after a reconnect).
    public var freshConnection = false

    /// Which proxy the request goes through (a CONNECT tunnel), if any: the process's environment by default.
    public var proxy: ProxyPolicy = .environment
    /// Set: the body goes here as it arrives (a long-lived answer: Server-Sent Events) instead of into
    /// `HTTPResponse.body`; `timeout` then bounds the connect only, and `maxResponseBytes` does not apply.
    public var stream: HTTPBodyStream?

    public static let defaultMaxResponseBytes = 1 << 20

    public init(
        _ method: Method, _ url: URL, body: [UInt8] = [], timeout: Duration = .seconds(30),
        maxResponseBytes: Int = HTTPRequest.defaultMaxResponseBytes, trust: Trust = .system
    ) {
        self.method = method
        self.url = url
        self.body = body
        self.timeout = timeout
        self.maxResponseBytes = maxResponseBytes
        self.trust = trust
    }

    /// Sets a header, replacing one of the same name (names compare case-insensitively); nil removes it.
    public subscript(header name: String) -> String? {
        get { headers.first { HeaderName.equal($0.name, name) }?.value }
        set {
            headers.removeAll { HeaderName.equal($0.name, name) }
            if let newValue { headers.append((name, newValue)) }
        }
    }
}

/// Where a streamed answer goes as it arrives, on the HTTP client's thread. While `isFull` says so, the transfer is
/// paused (the peer is held back by TCP) until `resume()`.
public final class HTTPBodyStream: Sendable {
    let head: @Sendable (_ status: Int) -> Void
    let body: @Sendable (_ bytes: UnsafeRawBufferPointer) -> Void
    let isFull: @Sendable () -> Bool
    /// Set by the client while the transfer runs: asks its thread to go on reading.
    let resumeHook = Mutex<(@Sendable () -> Void)?>(nil)

    /// - Parameters:
    ///   - head: once, when the answer's head is in, with its status.
    ///   - body: each piece of the body.
    ///   - isFull: asked before each piece; true pauses the transfer.
    public init(
        head: @escaping @Sendable (_ status: Int) -> Void,
        body: @escaping @Sendable (_ bytes: UnsafeRawBufferPointer) -> Void,
        isFull: @escaping @Sendable () -> Bool = { false }
    ) {
        self.head = head
        self.body = body
        self.isFull = isFull
    }

    /// The reader has room again: a paused transfer goes on.
    public func resume() { resumeHook.withLock { $0 }?() }
}

/// The final answer (an interim `100 Continue` is not one).
public struct HTTPResponse: Sendable {
    public var status: Int
    public var headers: [(name: String, value: String)]
    public var body: [UInt8]

    public init(status: Int, headers: [(name: String, value: String)] = [], body: [UInt8] = []) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// The first header of that name (case-insensitive).
    public func header(_ name: String) -> String? {
        headers.first { HeaderName.equal($0.name, name) }?.value
    }

    /// Seconds the server asked to wait (`Retry-After`: seconds or an HTTP date, RFC 9110), never negative.
    public var retryAfter: Double? {
        guard let value = header("Retry-After")?.trimmingCharacters(in: .whitespaces) else { return nil }
        if let seconds = Double(value) { return max(0, seconds) }
        return Self.httpDate.withLock { $0.date(from: value) }.map { max(0, $0.timeIntervalSinceNow) }
    }

    private static let httpDate = Mutex<DateFormatter>(
        {
            let f = DateFormatter()
            f.locale = Locale(identifier: "en_US_POSIX")
            f.timeZone = TimeZone(identifier: "GMT")
            f.dateFormat = "EEE, dd MMM yyyy HH:mm:ss zzz"
            return f
        }())
}

/// Why a request got no answer. The message names the host at most: never a URL's path or query, which may hold
/// a token (Telegram's bot token is in the path).
public struct HTTPError: Error, Sendable, CustomStringConvertible {
    public enum Kind: Sendable, Equatable {
        case timedOut
        /// The answer was longer than `maxResponseBytes`.
        case tooLarge
        /// The host could not be resolved or reached.
        case connect
        /// The TLS handshake or the certificate check failed.
        case tls
        case cancelled
        /// The request itself cannot be sent as it is (a header with a line break).
        case invalidRequest
        /// Anything else the transfer met (a reset connection, a malformed answer).
        case failed
        /// An SMTP server said no (`serverCode`: its reply code) or refused the login.
        case refused
    }

    public let kind: Kind
    public let message: String
    /// The SMTP reply code of a refusal (5xx: never this mail; 4xx: try later).
    public var serverCode: Int?

    public init(_ kind: Kind, _ message: String) {
        self.kind = kind
        self.message = message
    }

    public var description: String { message }
}

/// Header names compare ASCII case-insensitively (RFC 9110), without Foundation's locale-aware comparison.
enum HeaderName {
    static func equal(_ a: String, _ b: String) -> Bool {
        a.utf8.elementsEqual(b.utf8) { lower($0) == lower($1) }
    }

    private static func lower(_ c: UInt8) -> UInt8 { (0x41...0x5A).contains(c) ? c | 0x20 : c }
}

/// What an answer's status says about the request, the one classification of every part that sends and retries
/// (the REST client's errors, hence the outbox's retries; the sinks' outcomes). What each part then does with a
/// class is its own: a sink pauses for a throttle and switches itself off when gone, the outbox retries both.
public enum AnswerClass: Sendable, Equatable {
    /// 2xx.
    case success
    /// 429: the other side asks to slow down.
    case throttled
    /// 408 and 5xx: the same request may go through later.
    case transient
    /// 3xx: redirects are never followed (the caller decides; a token must not follow one elsewhere).
    case redirect
    /// 410: the resource is gone for good.
    case gone
    /// Any other status (4xx): the request will not go through as it is.
    case refused

    public init(status: Int) {
        switch status {
        case 200..<300: self = .success
        case 429: self = .throttled
        case 408, 500..<600: self = .transient
        case 300..<400: self = .redirect
        case 410: self = .gone
        default: self = .refused
        }
    }

    /// Whether the same request may go through later without a change.
    public var mayRetry: Bool { self == .throttled || self == .transient }
}
