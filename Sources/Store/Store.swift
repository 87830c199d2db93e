import Alerts
import AllowanceAPI
import Foundation
import GRDB
import GRDBSQLite
import Logging
import StoreContract
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// The relay's SQLite file: one writer connection (GRDB's DatabasePool), read-only connections beside it
/// (`ReadConnections`), WAL, `synchronous=FULL` by default, a busy timeout so the CLI and the daemon can share the
/// file, versioned migrations; an integrity check on request.
public final class Store: Sendable {
    public let path: String
    /// The writer (and the migrations). Its own readers are never used: reads go to `readers`.
    let pool: DatabasePool
    let readers: ReadConnections
    /// The relay's hook into each write: set once the rules are loaded (and again on a reload).
    /// A class in the Mutex, not the closure itself: each `withLock` on a Mutex holding a function type wraps
    /// the stored closure in two more reabstraction thunks (inout through a generic), and after about 90,000
    /// events calling it overflowed the stack.
    let relay = Mutex<PlannerHooks?>(nil)
    /// Deliveries planned by the write in progress: after its commit they are handed to the relay at once (it
    /// wakes the sinks that got work, and gives them the rows so they need not read them back). Handed over once per
    /// write, not once per event: that made a burst quadratic.
    let planned = Mutex<[Delivery]>([])
    /// Outcomes of sends waiting for the next write's commit (`record(_:withNextWriteWithin:)`).
    let carried = CarriedOutcomes()
    /// The alerts' ordering rule for catch-ups (a live alert waits for the digest of what was missed): Alerts'
    /// policy, kept here because it is asked inside the transaction that plans.
    let gathering = Mutex(DigestGathering())
    /// The children with an item on their wish list not bought yet (nil: not read yet). Kept in memory because
    /// every stored balance asks: a query per event was part of a 24% rise in CPU per event (`relay_ab.py`,
    /// BENCHMARKS.md session 36). Exact, since only this process writes the file's wish lists (`storeWishList`);
    /// the file's lease keeps any other relay out.
    let goalChildren = Mutex<Set<UUID>?>(nil)

    public enum Durability: String, Sendable {
        /// A committed row survives power loss (the default).
        case full = "FULL"
        /// Faster; a power cut may lose the last transactions, never corrupt the file.
        case normal = "NORMAL"
    }

    /// SQLite's memory and log sizes, set by measurement (BENCHMARKS.md, session 12).
    enum Tuning {
        /// The writer's page cache while bursts come (SQLite's default, 2,000 KiB, otherwise). A burst's transaction
        /// touches the inbox's and the transactions' id indexes at random pages: with the default, SQLite spills dirty
        /// pages to the log in the middle of the transaction and reads evicted ones back, about two more system calls
        /// per event. Kept at all times, the large cache filled page by page at a steady 20 transactions a second,
        /// and the relay's memory grew 6 MiB over 15 minutes; so it is taken for bursts and given back after. 6 MiB:
        /// a 100,000-event blast ran as fast as with 8 (which peaked 2 MiB higher) and 5-8% faster than with 4.
        static let writerCacheKiB = 6144
        static let defaultCacheKiB = 2000
        /// Events in one commit that make it a burst.
        static let burstEvents = 256
        /// A reader's page cache: SQLite drops a reader's cache whenever another connection has written, which the
        /// writer does all the time here, so a large one only holds memory.
        static let readerCacheKiB = 512
        /// Log pages that make a commit fold the log back into the file (SQLite's default is 1,000). Each checkpoint
        /// reads, writes and fsyncs every page changed since the last one; with fewer, a page changed by many
        /// commits (an index's hot leaf, a child's row) is written back once instead of several times. The log's
        /// file stays at most about this many pages (16 MiB). Folding it on a thread of its own instead (session 42)
        /// gained a blast less than this host's noise, for a second connection, a thread and a C hook: not kept.
        static let checkpointPages = 4000
    }

    /// Whether the writer has the burst's large cache (only read and set in the writer's turn).
    let largeCache = Atomic<Bool>(false)

    /// Gives the writer the large cache for a commit of a burst's `events`, and takes it back once commits are small
    /// again. At the start of a write, before it changes anything: every cached page is clean.
    func sizeCache(_ db: Database, forCommitOf events: Int) throws {
        let large = events >= Tuning.burstEvents
        guard large != largeCache.load(ordering: .relaxed) else { return }
        largeCache.store(large, ordering: .relaxed)
        // Smaller again, SQLite frees the pages beyond the default size: the process's allocator reuses them.
        try db.execute(sql: "PRAGMA cache_size = \(-(large ? Tuning.writerCacheKiB : Tuning.defaultCacheKiB))")
    }

    /// What a commit waits for (store.durability).
    let durability: Durability

    private init(path: String, pool: DatabasePool, durability: Durability) {
        self.path = path
        self.pool = pool
        self.readers = ReadConnections(path: path, configuration: pool.configuration)
        self.durability = durability
    }

    deinit { readers.close() }  // before the writer (`pool`)

    /// Opens (creating if needed) and migrates the database at `path`. `readOnly`: for the commands that only read
    /// (`status`, `transactions` ...): nothing is created, migrated or checkpointed, so the file stays as it was byte
    /// for byte; a database an older version wrote is refused with the fix.
    public static func open(
        path: String, durability: Durability = .full, readOnly: Bool = false
    ) throws(StoreError) -> Store {
        if readOnly { return try openReadOnly(path: path, durability: durability) }
        let directory = (path as NSString).deletingLastPathComponent
        if !directory.isEmpty, !FileManager.default.fileExists(atPath: directory) {
            do {
                // Family money data: the folder the relay makes is its own (0700), whatever the umask.
                try FileManager.default.createDirectory(
                    atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            } catch {
                throw StoreError(
                    path: path,
                    "Cannot create the directory '\(directory)': \(error.localizedDescription). Check its permissions or set store.path."
                )
            }
        }
        try ownerOnly(path)
        var config = Configuration()
        config.busyMode = .timeout(5)
        config.prepareDatabase { db in
            try db.setDurability(durability)
            try db.execute(sql: "PRAGMA foreign_keys = ON")
            if db.configuration.readonly {
                try db.execute(sql: "PRAGMA cache_size = \(-Tuning.readerCacheKiB)")
            } else {
                try db.execute(sql: "PRAGMA wal_autocheckpoint = \(Tuning.checkpointPages)")
            }
        }
        // No integrity check here: it reads every page, and every command opens the store (0.3 s at a million
        // transactions). A file that is not a database fails right here, reading its schema; the daemon checks the
        // rest in the background (`checkIntegrity`).
        return try pool(path: path, config, durability: durability) { store in try Schema.migrator.migrate(store.pool) }
    }

    private static func openReadOnly(path: String, durability: Durability) throws(StoreError) -> Store {
        var config = Configuration()
        config.readonly = true
        config.busyMode = .timeout(5)
        config.prepareDatabase { db in try db.execute(sql: "PRAGMA cache_size = \(-Tuning.readerCacheKiB)") }
        return try pool(path: path, config, durability: durability) { store in
            guard try store.read({ db in try Schema.migrator.hasCompletedMigrations(db) }) else {
                throw StoreError(
                    path: path,
                    "The database was written by an older version of the relay. Start `allowance-relay run` once to bring it up to date."
                )
            }
        }
    }

    /// Opens the pool and readies the store (`prepare`: migrate, or check it is migrated), each failure as a
    /// StoreError naming the file.
    private static func pool(
        path: String, _ config: Configuration, durability: Durability, prepare: (Store) throws -> Void
    ) throws(StoreError) -> Store {
        do {
            let pool = try DatabasePool(path: path, configuration: config)
            if !config.readonly {
                // GRDB sets the writer to synchronous=NORMAL when it turns WAL on, after `prepareDatabase` ran: set
                // again, or no commit would wait for the disk whatever store.durability says (BENCHMARKS.md,
                // session 45: no fdatasync at all in a soak's 200 commits).
                try pool.writeWithoutTransaction { db in try db.setDurability(durability) }
            }
            let store = Store(path: path, pool: pool, durability: durability)
            try prepare(store)
            return store
        } catch let error as StoreError {
            throw error
        } catch let error as DatabaseError {
            throw StoreError(path: path, error)
        } catch {
            throw StoreError(path: path, "Cannot open the database: \(error).")
        }
    }

    /// SQLite's `quick_check` of every page, on a reader (the writer goes on meanwhile): nil when the file is sound,
    /// else what is wrong, with the fix. Its time grows with the file: the daemon runs it after its start, not before.
    public func integrityProblem() throws(StoreError) -> String? {
        let check = try read { db in try String.fetchOne(db, sql: "PRAGMA quick_check") }
        guard check != "ok" else { return nil }
        return
            "The database \(path) failed its integrity check (\(check ?? "no answer")). Stop the relay. \(StoreError.rebuildHint)"
    }

    /// The database is readable by its owner only (0600), whatever the umask: created so if missing, tightened if
    /// an older version left it 0644. SQLite gives the WAL and SHM files the database's permissions.
    private static func ownerOnly(_ path: String) throws(StoreError) {
        let fd = Glibc.open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        if fd >= 0 { Glibc.close(fd) }  // a failure to open is reported by SQLite below, with its own words
        for suffix in ["", "-wal", "-shm"] {
            var info = stat()
            guard stat(path + suffix, &info) == 0, info.st_uid == geteuid(), info.st_mode & 0o077 != 0 else { continue }
            guard chmod(path + suffix, 0o600) == 0 else {
                throw StoreError(
                    path: path,
                    "Cannot make '\(path + suffix)' private (chmod 600): \(String(cString: strerror(errno))).")
            }
        }
    }

    /// Moves a broken database (and its WAL files) aside, returning where it went; the next open starts empty
    /// and the next catch-up refills it from the server.
    public static func moveAside(path: String, now: Date = Date()) throws(StoreError) -> String {
        // "relay.sqlite.broken-2026-11-26T08-30-05Z": when, readable, and a name every file system takes.
        let stamp = ISODate.string(now).prefix(19).replacingOccurrences(of: ":", with: "-") + "Z"
        let target = "\(path).broken-\(stamp)"
        do {
            for suffix in ["", "-wal", "-shm"] where FileManager.default.fileExists(atPath: path + suffix) {
                try FileManager.default.moveItem(atPath: path + suffix, toPath: target + suffix)
            }
        } catch {
            throw StoreError(path: path, "Cannot move the database aside: \(error.localizedDescription).")
        }
        return target
    }

    /// The schema versions applied, oldest first.
    public func appliedMigrations() throws(StoreError) -> [String] {
        try read { db in try Schema.migrator.appliedMigrations(db) }
    }

    /// At a clean stop: fold the write-ahead log into the database file and empty it, so the file alone is
    /// complete (a copy or backup of just relay.sqlite has everything).
    public func checkpoint() throws(StoreError) {
        do { try pool.writeWithoutTransaction { db in try db.execute(sql: "PRAGMA wal_checkpoint(TRUNCATE)") } } catch {
            throw StoreError(path: path, error)
        }
    }

    /// Rewrites the database file without its free pages (after a prune: SQLite does not shrink files by itself).
    /// Needs a moment alone with the database: writers wait (busy timeout) until it is done.
    public func vacuum() throws(StoreError) {
        do { try pool.writeWithoutTransaction { db in try db.execute(sql: "VACUUM") } } catch {
            throw StoreError(path: path, error)
        }
        try checkpoint()
    }

    func read<T>(_ body: (Database) throws -> T) throws(StoreError) -> T {
        do { return try readers.read(body) } catch { throw StoreError(path: path, error) }
    }

    /// One SQLite transaction whose commit does not wait for the disk (synchronous=NORMAL for it, whatever
    /// store.durability says): for what a power cut may forget at no cost. The OS has the write, so a kill -9
    /// loses nothing; the next durable commit makes it durable too (the WAL is written in order).
    func writeWithoutSync<T>(_ body: (Database) throws -> T) throws(StoreError) -> T {
        do {
            return try pool.writeWithoutTransaction { db in
                if durability != .normal { try db.setDurability(.normal) }
                defer {
                    if durability != .normal { try? db.setDurability(durability) }
                }
                // A send's outcome goes in here when no event's write takes it.
                return try db.inCachedTransaction("BEGIN IMMEDIATE TRANSACTION") { try body(db) }
            }
        } catch {
            throw StoreError(path: path, error)
        }
    }

    /// One SQLite transaction. When it planned deliveries and committed, they go to the relay's `onPlanned`. The
    /// outcomes of sends left to be carried go in with it.
    func write<T>(_ body: (Database) throws -> T) throws(StoreError) -> T {
        do {
            return try pool.writeWithoutTransaction { db in
                var tickets: [UInt64] = []
                do {
                    let result = try db.inCachedTransaction("BEGIN IMMEDIATE TRANSACTION") {
                        // The outcomes first: each grows its row (a time, a state) while the row's page still has
                        // the room. Written after this write's new rows had filled that page, the growth split it
                        // three ways, a third of the pages an event wrote (BENCHMARKS.md, session 41).
                        tickets = try carryOutcomes(db)
                        return try body(db)
                    }
                    // Committed, and still in this writer's turn (writers on other threads wait for it): the rows are
                    // this transaction's own, and the hand-overs follow the commits' order. Told once the COMMIT has
                    // returned, not by a GRDB transaction observer: when SQLite rolls a failed COMMIT back by itself
                    // (a full disk), GRDB tells no observer, and the observer fired at the next commit instead, so
                    // outcomes never written counted as written and their alerts went again.
                    if !tickets.isEmpty { carried.committed(tickets) }
                    let rows = planned.withLock { rows in
                        defer { rows.removeAll() }
                        return rows
                    }
                    if !rows.isEmpty, let handOver = relay.withLock({ $0?.onPlanned }) { handOver(rows) }
                    return result
                } catch {
                    planned.withLock { $0.removeAll() }  // rolled back: nothing was planned after all
                    carried.rolledBack(tickets)
                    throw error
                }
            }
        } catch {
            throw StoreError(path: path, error)
        }
    }

    /// Writes the outcomes left to be carried into the write in progress; returns their tickets. On a failure they
    /// are their callers' again, to write or keep.
    private func carryOutcomes(_ db: Database) throws -> [UInt64] {
        let outcomes = carried.take()
        do {
            for (_, results) in outcomes { try Self.writeOutcomes(db, results) }
        } catch {
            carried.rolledBack(outcomes.map(\.ticket))
            throw error
        }
        return outcomes.map(\.ticket)
    }
}

/// The rules that plan deliveries and what to call once they are committed.
final class PlannerHooks: Sendable {
    let planner: any AlertPlanner
    let onPlanned: (@Sendable ([Delivery]) -> Void)?

    init(planner: any AlertPlanner, onPlanned: (@Sendable ([Delivery]) -> Void)?) {
        self.planner = planner
        self.onPlanned = onPlanned
    }
}

extension StoreError {
    /// SQLite's failure (GRDB's `DatabaseError`) in the contract's words: what happened and what to do.
    init(path: String, _ error: any Error) {
        let (code, message) = Self.explain(error)
        self.init(path: path, message, code: code)
    }

    private static func explain(_ error: any Error) -> (Code, String) {
        if let store = error as? StoreError { return (store.code, store.message) }
        guard let db = error as? DatabaseError else { return (.sqlite, "\(error)") }
        switch db.resultCode {
        case .SQLITE_NOTADB, .SQLITE_CORRUPT:
            return (
                .unreadable, "The file is not a readable relay database (\(db.message ?? "corrupt")). \(rebuildHint)"
            )
        case .SQLITE_FULL:
            return (.diskFull, "The disk is full; nothing was written. Free some space: the relay retries.")
        case .SQLITE_BUSY, .SQLITE_LOCKED:
            return (
                .locked, "The database is locked by another process for more than 5 s. Is a second relay running on it?"
            )
        case .SQLITE_READONLY, .SQLITE_PERM, .SQLITE_CANTOPEN:
            return (
                .notWritable,
                "The database cannot be opened for writing (\(db.message ?? "permission denied")). Check the file's owner and permissions."
            )
        default:
            return (.sqlite, "SQLite error \(db.resultCode.rawValue): \(db.message ?? "unknown").")
        }
    }
}

extension Database {
    /// Whether this connection's commits wait for the disk (`PRAGMA synchronous`); run, not cached: SQLite applies
    /// the pragma when it compiles it. Straight to SQLite: GRDB's statement would be built, authorized and thrown
    /// away twice for each commit that does not wait.
    fileprivate func setDurability(_ durability: Store.Durability) throws {
        let sql = "PRAGMA synchronous = \(durability.rawValue)"
        let code = sqlite3_exec(sqliteConnection, sql, nil, nil, nil)
        guard code == SQLITE_OK else {
            throw DatabaseError(resultCode: ResultCode(rawValue: code), message: lastErrorMessage, sql: sql)
        }
    }
}
