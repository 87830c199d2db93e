import Foundation
import SignalRProtocol

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

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
    public func token() throws(SettingsError) -> String? { try Secret.read(file: path, what: "token file").value }
}

/// Email + password login (`POST /api/v1/auth/login`, seed 000). The token is kept in memory only, and a new
/// one is fetched 5 minutes before it expires (seed 002) or once after the server refused it. Concurrent
/// callers share one login.
public actor LoginSession: TokenSource {
    public static let refreshMargin: TimeInterval = 300

    let baseURL: URL
    let email: String
    let password: @Sendable () throws -> Secret
    let session: URLSession
    private var current: (token: Secret, expiresAt: Date)?
    private var pending: Task<(token: Secret, expiresAt: Date), any Error>?

    /// `password` is asked at each login (a password file is read then, not kept).
    public init(baseURL: URL, email: String, session: URLSession = .shared, password: @escaping @Sendable () throws -> Secret) {
        self.baseURL = baseURL
        self.email = email
        self.password = password
        self.session = session
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
        let what = "POST /api/v1/auth/login"
        let body: JSONValue = ["email": .string(email), "password": .string(try password().value)]
        var request = URLRequest(url: baseURL.appending(path: "api/v1/auth/login"), timeoutInterval: 30)
        request.httpMethod = "POST"
        request.httpBody = Data(body.serialized.utf8)
        request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        request.setValue("application/json", forHTTPHeaderField: "Accept")
        let data: Data
        let response: URLResponse
        do {
            (data, response) = try await session.data(for: request)
        } catch {
            throw APIError(.network, "\(what) failed: \(error.localizedDescription)")
        }
        let status = (response as? HTTPURLResponse)?.statusCode ?? 0
        switch status {
        case 200: break
        case 400, 401, 403:
            throw APIError(.unauthorized, "The server refused the login for \(email) (HTTP \(status)). Check server.email and the password.", status: status)
        default:
            throw APIError(APIError.Kind(status: status), "\(what) answered HTTP \(status)", status: status)
        }
        guard let json = try? JSONValue(parsing: data), let token = json["token"]?.stringValue, !token.isEmpty,
            let expiry = json["expiresAt"]?.stringValue.flatMap(ISODate.parse)
        else {
            throw APIError(.invalidResponse, "\(what) did not return a token and an expiresAt date.")
        }
        return (Secret(token), expiry)
    }
}
