import AllowanceAPI
import Foundation

/// The storage contract's one error, whichever backend raised it: a failure that names the file or database and
/// says what to do, with its `code` for the code that decides what next (the sync engine stops at a conflict; the
/// CLI picks its exit status).
public struct StoreError: Error, Sendable, CustomStringConvertible {
    public enum Code: Sendable, Equatable {
        /// The store refused the operation as asked (no such row, the outbox full, a state that does not allow it).
        case refused
        /// What the server sent contradicts the cache (another server, or a reset one): nothing was stored, and
        /// retrying will not help.
        case conflict
        /// The file is not a readable relay database.
        case unreadable
        case diskFull
        /// Another process holds the database.
        case locked
        /// The file or its folder cannot be written.
        case notWritable
        /// Any other failure of the database, with its own words (SQLite's or PostgreSQL's).
        case sqlite
    }

    public let path: String
    public let code: Code
    public let message: String
    /// The server's data contradicts the cache: the message has the evidence and the fix.
    public var isConflict: Bool { code == .conflict }

    public static let rebuildHint = "Move it aside and rebuild from the server with: allowance-relay run --rebuild"
    /// What a conflict's message ends with.
    public static let conflictFix =
        "Nothing was merged and the cached data is kept. If the backend was reset, restored or replaced, start the cache over from it: allowance-relay run --rebuild"

    public init(path: String, _ message: String, code: Code = .refused) {
        self.path = path
        self.code = code
        self.message = message
    }

    public var description: String { "\(path): \(message)" }
}

/// A child of the server's as a store keeps it: its figures in cents, the only ones a store writes.
public struct KeptChild: Sendable {
    public let child: Child
    public let weeklyAllowance: Int64
    public let balance: Int64
}

extension StoreError {
    /// The children of a catch-up with their figures in cents. A catch-up with a child whose figures the cache cannot
    /// keep (`Child.problem`: money is kept in cents) is refused whole, on either store: this throws, nothing of it is
    /// stored, the cache keeps what it had, and the next catch-up asks again.
    public static func kept(_ children: [Child], path: String) throws(StoreError) -> [KeptChild] {
        try children.map { (c) throws(StoreError) -> KeptChild in
            guard let weekly = Money.minorUnits(c.weeklyAllowance), let balance = Money.minorUnits(c.currentBalance)
            else {
                throw StoreError(
                    path: path,
                    "the server's child \(c.id.lowercased) (\(SafeText.forLog(c.firstName))) cannot be kept: \(c.problem ?? "its figures have more than two decimals"). Nothing of this catch-up was stored and the cache keeps what it had; the next catch-up asks again. The backend's data needs mending"
                )
            }
            return KeptChild(child: c, weeklyAllowance: weekly, balance: balance)
        }
    }
}
