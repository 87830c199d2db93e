import GRDB
import Synchronization

/// The store's read-only connections beside its writer: a read takes a free one (or opens one) and gives it back.
///
/// Why not GRDB's `DatabasePool` readers: each `DatabasePool.read` takes and gives back its reader under a lock GRDB
/// builds on a concurrent dispatch queue, and asks that lock's read side first. When a thread's barrier waits there
/// behind another thread's read (two sink workers reading at once is enough), libdispatch wakes its own thread pool
/// to hand the lock over; the pool's first worker starts its monitor, which wakes the process every second for good
/// (`IdleTests`, BENCHMARKS.md session 35). Here the only lock is a mutex, and each connection's own serial queue
/// is used by one thread at a time, so no queue is ever contended.
final class ReadConnections: Sendable {
    private let path: String
    private let configuration: Configuration
    private let free = Mutex<[DatabaseQueue]>([])
    /// Connections kept open between reads; one more read at once opens one more, closed after it.
    private let kept: Int

    /// `configuration` is the writer's, made read-only here; its busy timeout covers the rare locks a WAL reader
    /// meets (another process's recovery or last close).
    init(path: String, configuration: Configuration, kept: Int = 4) {
        var configuration = configuration
        configuration.readonly = true
        (self.path, self.configuration, self.kept) = (path, configuration, kept)
    }

    /// Runs `body` in one read transaction: it sees one committed state of the file throughout.
    ///
    /// The transaction's BEGIN and COMMIT are compiled once a connection, as the writer's are (`inCachedTransaction`):
    /// GRDB's `read` compiled both afresh for every read.
    func read<T>(_ body: (Database) throws -> T) throws -> T {
        let connection = try free.withLock { $0.popLast() } ?? DatabaseQueue(path: path, configuration: configuration)
        defer { free.withLock { if $0.count < kept { $0.append(connection) } } }
        return try connection.inDatabase { db in
            try db.inCachedTransaction("BEGIN DEFERRED TRANSACTION") { try body(db) }
        }
    }

    /// Closes the kept connections (before the writer's: the last connection to close folds the log back).
    func close() {
        for connection in free.withLock({ connections in
            defer { connections.removeAll() }
            return connections
        }) {
            try? connection.close()
        }
    }
}
