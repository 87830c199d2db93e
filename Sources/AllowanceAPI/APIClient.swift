import Core
import Foundation
import HTTPTransport
import SignalRProtocol

/// The Allowance Tracker REST API (`/api/v1`), as far as the relay needs it.
public struct APIClient: Sendable {
    public let baseURL: URL
    private let tokens: (any TokenSource)?
    private let http: HTTPClient
    /// Whom the server's TLS certificate must come from (`server.ca_file`, `insecure_tls`), as for the hub.
    private let trust: HTTPRequest.Trust
    /// The longest answer read (`server.max_response_bytes`): a page of transactions is some kilobytes; a broken or
    /// hostile server must not make the relay hold gigabytes.
    private let maxResponseBytes: Int

    public static let defaultMaxResponseBytes = 8 << 20

    public init(
        baseURL: URL, tokens: (any TokenSource)?, http: HTTPClient = .shared, trust: HTTPRequest.Trust = .system,
        maxResponseBytes: Int = APIClient.defaultMaxResponseBytes
    ) {
        self.baseURL = baseURL
        self.tokens = tokens
        self.http = http
        self.trust = trust
        self.maxResponseBytes = maxResponseBytes
    }

    /// A client with a fixed token (tests, scripts).
    public init(baseURL: URL, token: String) {
        self.init(baseURL: baseURL, tokens: StaticToken(Secret(token)))
    }

    public func children() async throws(APIError) -> [Child] {
        let json = try await get("api/v1/children")
        guard case .array(let items) = json else {
            throw APIError(.invalidResponse, "GET /api/v1/children did not return an array.")
        }
        return try items.map { (item) throws(APIError) -> Child in
            do throws(APIError) { return try Child(json: item) } catch {
                throw APIError(.invalidResponse, "GET /api/v1/children: \(error.message)")
            }
        }
    }

    /// Who the token belongs to (`GET /api/v1/auth/me`): the identity a cache is bound to. A server without
    /// that endpoint (404) is known by its URL alone.
    public func identity() async throws(APIError) -> ServerIdentity {
        do {
            let me = try await get("api/v1/auth/me")
            return ServerIdentity(
                url: baseURL, userId: me["userId"]?.stringValue, familyId: me["familyId"]?.stringValue)
        } catch  where error.status == 404 || error.status == 405 {
            return ServerIdentity(url: baseURL)
        }
    }

    /// One page of a child's transactions, newest first; every item must be readable.
    public func transactions(child: UUID, limit: Int, offset: Int) async throws(APIError) -> [Transaction] {
        try await page(child: child, limit: limit, offset: offset).map { (item) throws(APIError) -> Transaction in
            switch item {
            case .transaction(let t): return t
            case .unreadable(let row):
                throw APIError(.invalidResponse, "GET /api/v1/children/…/transactions: \(row.reason)")
            }
        }
    }

    /// One item of a page: a transaction, or a row that could not be read (kept aside by the catch-up, so one
    /// bad row does not stop the others).
    public enum PageItem: Sendable, Equatable {
        case transaction(Transaction)
        case unreadable(RejectedRow)

        /// The id as the server sent it, lower case (nil: it had none).
        public var id: String? {
            switch self {
            case .transaction(let t): t.id.lowercased
            case .unreadable(let r): r.id.hasPrefix("unreadable:") ? nil : r.id.lowercased()
            }
        }
    }

    /// One page of a child's transactions, newest first, as the server sent them.
    public func page(child: UUID, limit: Int, offset: Int) async throws(APIError) -> [PageItem] {
        let path = "api/v1/children/\(child.lowercased)/transactions"
        let json = try await get(path, query: [("limit", String(limit)), ("offset", String(offset))])
        guard case .array(let items) = json else {
            throw APIError(.invalidResponse, "GET /\(path) did not return an array.")
        }
        return items.enumerated().map { index, item in
            do throws(APIError) {
                return .transaction(try Transaction(json: item))
            } catch {
                let id = item["id"]?.stringValue ?? "unreadable:offset-\(offset + index)"
                return .unreadable(RejectedRow(id: id, childId: child, reason: error.message, payload: item.serialized))
            }
        }
    }

    /// Creates a transaction. The same `idempotencyKey` sent again gets the same transaction, applied once.
    public func createTransaction(
        child: UUID, amount: Decimal, type: TransactionType, description: String, idempotencyKey: String
    ) async throws(APIError) -> Transaction {
        let body: JSONValue = [
            "childId": .string(child.lowercased), "amount": .number("\(amount)"),
            "type": .string(type.rawValue), "description": .string(description),
        ]
        var request = HTTPRequest(
            .post, baseURL.appending(path: "api/v1/transactions"), body: Array(body.serialized.utf8))
        request[header: "Content-Type"] = "application/json"
        request[header: "Idempotency-Key"] = idempotencyKey
        let json = try await send(request, what: "POST /api/v1/transactions", expect: [200, 201])
        do {
            return try Transaction(json: json)
        } catch {
            throw APIError(.invalidResponse, "POST /api/v1/transactions: \(error)")
        }
    }

    /// Signs in (`POST /api/v1/auth/login`): the session token and when it expires.
    public func login(email: String, password: Secret) async throws(APIError) -> (token: Secret, expiresAt: Date) {
        let what = "POST /api/v1/auth/login"
        var request = HTTPRequest(
            .post, baseURL.appending(path: "api/v1/auth/login"),
            body: Array((["email": .string(email), "password": .string(password.value)] as JSONValue).serialized.utf8))
        request[header: "Content-Type"] = "application/json"
        let json: JSONValue
        do {
            json = try await sendOnce(request, what: what, expect: [200])
        } catch  where [400, 401, 403].contains(error.status ?? 0) {
            throw APIError(
                .unauthorized,
                "The server refused the login for \(email) (HTTP \(error.status!)). Check server.email and the password.",
                status: error.status)
        }
        guard let token = json["token"]?.stringValue, !token.isEmpty,
            let expiry = json["expiresAt"]?.stringValue.flatMap(ISODate.parse)
        else {
            throw APIError(.invalidResponse, "\(what) did not return a token and an expiresAt date.")
        }
        return (Secret(token), expiry)
    }

    func get(_ path: String, query: [(String, String)] = []) async throws(APIError) -> JSONValue {
        var components = URLComponents(url: baseURL.appending(path: path), resolvingAgainstBaseURL: false)!
        if !query.isEmpty { components.queryItems = query.map { URLQueryItem(name: $0.0, value: $0.1) } }
        return try await send(HTTPRequest(.get, components.url!), what: "GET /\(path)", expect: [200])
    }

    /// Sends with the current token; a 401 asks the token source for a fresh one once.
    private func send(_ request: HTTPRequest, what: String, expect: Set<Int>) async throws(APIError) -> JSONValue {
        do {
            return try await sendOnce(request, what: what, expect: expect)
        } catch  where error.kind == .unauthorized && error.status == 401 && tokens != nil {
            await tokens?.refused()
            return try await sendOnce(request, what: what, expect: expect)
        }
    }

    private func sendOnce(_ original: HTTPRequest, what: String, expect: Set<Int>) async throws(APIError) -> JSONValue {
        var request = original
        request.trust = trust
        request.maxResponseBytes = maxResponseBytes
        request[header: "Accept"] = "application/json"
        do {
            if let t = try await tokens?.token() {
                guard HeaderValue.isSafe(t) else {
                    throw APIError(
                        .unauthorized,
                        "The access token holds a line break or another control character: refused (check the token file)."
                    )
                }
                request[header: "Authorization"] = "Bearer \(t)"
            }
        } catch let error as APIError {
            throw error
        } catch {
            throw APIError(.unauthorized, "No token: \(error)")
        }
        let response: HTTPResponse
        do {
            response = try await http.send(request)
        } catch  where error.kind == .tooLarge {
            throw APIError(.invalidResponse, "\(what): \(error.message) (server.max_response_bytes raises the limit).")
        } catch {
            throw APIError(.network, "\(what) failed: \(error.message)")
        }
        let status = response.status
        if (300..<400).contains(status) {
            // Not followed: the token goes to the configured server only, and a moved API is a config change.
            let to = response.header("Location").flatMap {
                URL(string: $0, relativeTo: request.url)?.absoluteURL.originForLogs
            }
            throw APIError(
                .invalidResponse,
                "\(what) was redirected (HTTP \(status)\(to.map { " to " + $0 } ?? "")); not followed, so that the token goes only to the configured server. Set server.url to the API's real address.",
                status: status)
        }
        guard expect.contains(status) else {
            let detail =
                (try? JSONValue(parsing: response.body))?["error"]?.stringValue.map {
                    ": \(SafeText.printable($0).prefix(200))"
                } ?? ""
            throw APIError(
                APIError.Kind(status: status), "\(what) answered HTTP \(status)\(detail)", status: status,
                retryAfter: response.retryAfter)
        }
        do {
            return try JSONValue(parsing: response.body)
        } catch {
            throw APIError(.invalidResponse, "\(what) returned invalid JSON (\(error)).")
        }
    }
}

/// The AllowanceAPI module's one error: a failed API call, classified by its HTTP answer (retry only what a retry
/// can fix); a payload that does not read as the domain's types; a secret file that cannot be used.
public struct APIError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Kind: Sendable, Equatable {
        case badRequest, unauthorized, forbidden, notFound, conflict, rateLimited, server, network, invalidResponse
        /// JSON that does not read as a transaction, an alert or an amount (a server's, or a row of our own).
        case invalidPayload
        /// A token, password or webhook secret file that cannot be used (`problem` and `fix` apart).
        case secretFile

        init(status: Int) {
            switch (status, AnswerClass(status: status)) {
            case (400, _), (422, _): self = .badRequest
            case (401, _): self = .unauthorized
            case (403, _): self = .forbidden
            case (404, _): self = .notFound
            case (409, _): self = .conflict
            case (408, _), (_, .throttled): self = .rateLimited
            case (_, .transient): self = .server
            default: self = .invalidResponse
            }
        }

        /// 408/429/5xx and network failures may succeed later; the rest will not without a change.
        public var isRetryable: Bool { [.rateLimited, .server, .network].contains(self) }
    }

    public let kind: Kind
    /// The whole sentence, for logs: what is wrong (then the fix, when there is one).
    public let message: String
    public let status: Int?
    /// Seconds the server asked us to wait (`Retry-After`), if it said.
    public let retryAfter: Double?
    /// How to fix it, apart from `problem` (a config check places them in its own format).
    public let fix: String?

    public init(_ kind: Kind, _ message: String, status: Int? = nil, retryAfter: Double? = nil) {
        self.kind = kind
        self.message = message
        self.status = status
        self.retryAfter = retryAfter
        fix = nil
    }

    /// A mistake the user can fix: `message` says both, "<problem>. Fix: <fix>."
    public init(_ kind: Kind, _ problem: String, fix: String) {
        self.kind = kind
        message = "\(problem). Fix: \(fix)."
        status = nil
        retryAfter = nil
        self.fix = fix
    }

    /// What is wrong, without the fix.
    public var problem: String {
        if let fix, message.hasSuffix(". Fix: \(fix).") { return String(message.dropLast(" Fix: \(fix).".count + 1)) }
        return message.hasSuffix(".") ? String(message.dropLast()) : message
    }

    public var description: String { message }
}
