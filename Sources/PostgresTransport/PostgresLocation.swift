import Foundation

/// Where a PostgreSQL database is, as `store.url` says it: `postgres://USER@HOST:PORT/DATABASE?sslmode=MODE`.
/// The password is never part of it: it comes from a file or the environment (`PostgresConnection`), so that it
/// shows in no config file, `ps` listing, log line or error message. `description` is safe to log.
public struct PostgresLocation: Sendable, Equatable, CustomStringConvertible {
    public let user: String
    public let host: String
    public let port: Int
    public let database: String
    /// libpq's `sslmode`: `disable`, `allow`, `prefer` (libpq's default), `require`, `verify-ca`, `verify-full`.
    public let sslMode: String?
    /// The CA that signed the server's certificate, for `verify-ca` and `verify-full`.
    public let sslRootCert: String?

    public static let sslModes = ["disable", "allow", "prefer", "require", "verify-ca", "verify-full"]
    /// The query parameters understood; any other is a mistake worth saying.
    static let parameters: Set = ["sslmode", "sslrootcert"]

    /// Reads `text`; the error says what is wrong and how a right one looks.
    public init(_ text: String) throws(PostgresError) {
        let example = "postgres://relay@db.home.lan:5432/allowance?sslmode=verify-full"
        func mistake(_ what: String) -> PostgresError {
            PostgresError(
                .location,
                "\(what): write it as \(example) (the password goes in a file or the environment, never here)")
        }
        guard let colon = text.firstIndex(of: ":") else { throw mistake("not a PostgreSQL URL") }
        let scheme = text[..<colon].lowercased()
        guard scheme == "postgres" || scheme == "postgresql" else {
            throw mistake("the scheme is \(scheme.isEmpty ? "missing" : "'\(scheme)'"), not postgres://")
        }
        guard let components = URLComponents(string: text), let host = components.host, !host.isEmpty else {
            throw mistake("no host in the URL")
        }
        guard components.password == nil else {
            throw PostgresError(
                .location,
                "the URL holds a password: take it out and put it in store.password_file (a file only the relay's user can read) or ALLOWANCE_RELAY_STORE_PASSWORD"
            )
        }
        guard let user = components.user, !user.isEmpty else { throw mistake("no user in the URL") }
        let database = String(components.path.drop { $0 == "/" })
        guard !database.isEmpty, !database.contains("/") else { throw mistake("no database name after the host") }
        let port = components.port ?? 5432
        guard (1...65535).contains(port) else { throw mistake("the port \(port) is out of range") }
        var sslMode: String?
        var sslRootCert: String?
        for item in components.queryItems ?? [] {
            guard Self.parameters.contains(item.name) else {
                throw mistake(
                    "'\(item.name)' is not a parameter this relay passes on (known: \(Self.parameters.sorted().joined(separator: ", ")))"
                )
            }
            if item.name == "sslmode" {
                guard let mode = item.value, Self.sslModes.contains(mode) else {
                    throw mistake(
                        "sslmode is '\(item.value ?? "")', not one of \(Self.sslModes.joined(separator: ", "))")
                }
                sslMode = mode
            } else {
                sslRootCert = item.value
            }
        }
        self.user = user.removingPercentEncoding ?? user
        self.host = host
        self.port = port
        self.database = database.removingPercentEncoding ?? database
        self.sslMode = sslMode
        self.sslRootCert = sslRootCert
    }

    public var description: String {
        var text = "postgres://\(user)@\(host.contains(":") ? "[\(host)]" : host):\(port)/\(database)"
        if let sslMode { text += "?sslmode=\(sslMode)" }
        return text
    }
}
