import Core
import GRDB
import GRDBSQLite
import Synchronization

/// Folds the write-ahead log back into the database file beside the writer, not in its commit.
///
/// SQLite's automatic checkpoint runs inside the commit that made the log reach its size, on the writer's thread: it
/// reads, writes and fsyncs every page changed since the last one while the events behind that commit wait (in a blast,
/// a ninth of the writer's time; BENCHMARKS.md, session 42). Here the commit only asks (a WAL hook on the writer's
/// connection), and a connection of the checkpointer's own folds the log on a thread of its own. Its checkpoint is
/// PASSIVE: it copies what is committed and never blocks the writer, which goes on appending; the log starts over
/// from its beginning at the first write after a checkpoint that copied everything. Should the log still grow to
/// `inlinePages` (the thread cannot keep up, or its connection cannot be opened), the commit folds it itself, as
/// SQLite would: the log's size stays bounded either way.
final class Checkpointer: Sendable {
    let path: String
    /// The log's size, in pages, that asks for a checkpoint.
    let pages: Int32
    /// The size at which the committing writer folds the log itself.
    var inlinePages: Int32 { pages * 4 }
    private let synchronous: String
    /// A checkpoint is under way (at most one is).
    private let running = Atomic<Bool>(false)
    /// Opened at the first checkpoint, kept for the next.
    private let connection = Mutex<DatabaseQueue?>(nil)
    /// Checkpoints done on the thread, for tests.
    let folds = Atomic<Int>(0)

    init(path: String, pages: Int, synchronous: String) {
        self.path = path
        self.pages = Int32(pages)
        self.synchronous = synchronous
    }

    /// Replaces SQLite's automatic checkpoint on the writer's connection. The hook holds this object unretained:
    /// the pool's configuration, whose `prepareDatabase` calls this, keeps it for as long as the connection lives.
    func install(on db: Database) {
        sqlite3_wal_hook(
            db.sqliteConnection,
            { context, db, _, frames in
                Unmanaged<Checkpointer>.fromOpaque(context!).takeUnretainedValue().committed(db, frames: frames)
                return SQLITE_OK
            }, Unmanaged.passUnretained(self).toOpaque())
    }

    /// After each commit on the writer (its thread, its connection `db`), with the log's size in pages.
    private func committed(_ db: OpaquePointer?, frames: Int32) {
        if frames >= inlinePages {
            sqlite3_wal_checkpoint_v2(db, nil, SQLITE_CHECKPOINT_PASSIVE, nil, nil)
            return
        }
        guard frames >= pages,
            running.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged
        else { return }
        OwnThread.startDetached(named: "checkpoint") {
            self.fold()
            self.running.store(false, ordering: .releasing)
        }
    }

    private func fold() {
        connection.withLock { queue in
            if queue == nil {
                var config = Configuration()
                config.busyMode = .timeout(5)
                config.prepareDatabase { db in try db.execute(sql: "PRAGMA synchronous = \(self.synchronous)") }
                queue = try? DatabaseQueue(path: path, configuration: config)
            }
            // Again while what the writer committed meanwhile is a log's size itself: no commit asks while this
            // runs. A failure (another checkpoint holds the log: the clean stop's) leaves the log to the next one.
            while let row = try? queue?.writeWithoutTransaction({ db in
                try Row.fetchOne(db, sql: "PRAGMA wal_checkpoint(PASSIVE)")
            }) {
                folds.add(1, ordering: .relaxed)
                let (log, copied) = (row[1] as Int, row[2] as Int)
                if row[0] as Int != 0 || log - copied < pages { break }
            }
        }
    }
}
