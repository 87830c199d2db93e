/// What went wrong talking to PostgreSQL, in words a user can act on. Never holds a password: libpq's messages
/// name the host, the user and the database, not the secret.
public struct PostgresError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Kind: Sendable, Equatable {
        /// `store.url` is not a usable PostgreSQL URL.
        case location
        /// No connection could be made (server down, refused password, TLS refused).
        case connect
        /// The connection was lost (the server restarted, the network cut it): a new one may work.
        case lost
        /// The server refused a statement; `sqlState` says why (`40001` serialization, `23505` unique, ...).
        case statement
    }

    public let kind: Kind
    public let message: String
    /// The SQLSTATE code of a refused statement.
    public let sqlState: String?

    public init(_ kind: Kind, _ message: String, sqlState: String? = nil) {
        self.kind = kind
        self.message = message
        self.sqlState = sqlState
    }

    public var description: String { sqlState.map { "\(message) (SQLSTATE \($0))" } ?? message }
}
