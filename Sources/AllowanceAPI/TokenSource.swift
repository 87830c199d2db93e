import Foundation
import HTTPTransport

/// Where bearer tokens come from. Asked before every hub connect and every REST call, so a rotated token file
/// or a renewed login is picked up without a restart. Tokens never print themselves.
public protocol TokenSource: Sendable {
    /// The token to send now (nil: send none).
    func token() async throws -> String?
    /// The server refused the last token: the next `token()` must not hand it out again.
    func refused() async
}

extension TokenSource {
    public func refused() async {}
}

/// A token given in the configuration or the environment.
public struct StaticToken: TokenSource {
    let secret: Secret
    public init(_ secret: Secret) { self.secret = secret }
    public func token() -> String? { secret.value }
}

/// A token file (mode 600), read afresh each time: rotate it by rewriting the file.
public struct TokenFile: TokenSource {
    public let path: String
    public init(path: String) { self.path = path }
    public func token() throws(APIError) -> String? { try Secret.read(file: path, what: "token file").value }
}

/// Email + password login (`POST /api/v1/auth/login`). The token is kept in memory only, and a new
/// one is fetched 5 minutes before it expires or once after the server refused it. Concurrent
/// callers share one login.
public actor LoginSession: TokenSource {
    public static let refreshMargin: TimeInterval = 300

    let api: APIClient
    let email: String
    let password: @Sendable () throws -> Secret
    private var current: (token: Secret, expiresAt: Date)?
    private var pending: Task<(token: Secret, expiresAt: Date), any Error>?

    /// `password` is asked at each login (a password file is read then, not kept).
    public init(
        baseURL: URL, email: String, http: HTTPClient = .shared, trust: HTTPRequest.Trust = .system,
        password: @escaping @Sendable () throws -> Secret
    ) {
        self.api = APIClient(baseURL: baseURL, tokens: nil, http: http, trust: trust)
        self.email = email
        self.password = password
    }

    public func token() async throws -> String? {
        if let current, current.expiresAt.timeIntervalSinceNow > Self.refreshMargin { return current.token.value }
        if pending == nil {
            pending = Task { try await self.login() }
        }
        defer { pending = nil }
        let fresh = try await pending!.value
        current = fresh
        return fresh.token.value
    }

    public func refused() {
        current = nil
    }

    /// When the token in hand expires (nil before the first login).
    public var expiresAt: Date? { current?.expiresAt }

    private func login() async throws -> (token: Secret, expiresAt: Date) {
        try await api.login(email: email, password: try password())
    }
}
