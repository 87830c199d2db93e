import Foundation
import GRDB
import Testing

@testable import Store

/// The write-ahead log folded back beside the writer: the database file alone (read by SQLite, without its log)
/// shows what a checkpoint copied; the log's file shows how far it grew.
@Suite struct CheckpointerTests {
    /// A pool whose writer asks `checkpointer` instead of folding the log in its commits.
    func pool(_ checkpointer: Checkpointer, at path: String) throws -> DatabasePool {
        var config = Configuration()
        config.prepareDatabase { db in
            if !db.configuration.readonly { checkpointer.install(on: db) }
        }
        let pool = try DatabasePool(path: path, configuration: config)
        try pool.write { db in try db.execute(sql: "CREATE TABLE page (n INTEGER PRIMARY KEY, body BLOB NOT NULL)") }
        return pool
    }

    /// Commits `count` rows of a page each, one a commit.
    func fill(_ pool: DatabasePool, from first: Int, count: Int) throws {
        for n in first..<first + count {
            try pool.write { db in
                try db.execute(sql: "INSERT INTO page (n, body) VALUES (?, zeroblob(4000))", arguments: [n])
            }
        }
    }

    /// The rows the database file holds without its log: a copy of the file alone, opened by SQLite.
    func rowsInTheFileAlone(_ path: String) throws -> Int {
        let copy = path + ".alone"
        try? FileManager.default.removeItem(atPath: copy)
        try FileManager.default.copyItem(atPath: path, toPath: copy)
        return try DatabaseQueue(path: copy).read { db in
            try db.tableExists("page") ? Int.fetchOne(db, sql: "SELECT COUNT(*) FROM page") ?? 0 : 0
        }
    }

    func logPages(_ path: String) throws -> Int {
        let size = (try FileManager.default.attributesOfItem(atPath: path + "-wal")[.size] as? Int) ?? 0
        return max(0, size - 32) / (4096 + 24)
    }

    @Test func aLogPastItsSizeIsFoldedOnTheCheckpointersOwnThread() async throws {
        let path = temporaryStorePath()
        try FileManager.default.createDirectory(
            atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        let checkpointer = Checkpointer(path: path, pages: 40, synchronous: "FULL")
        let pool = try pool(checkpointer, at: path)
        // Three pages a commit (the row's, the root's, the file's size on page 1): past the size that asks (40, at
        // the 14th row), below the one at which a commit folds the log itself (160) and SQLite's own (1,000).
        try fill(pool, from: 0, count: 45)
        let deadline = ContinuousClock.now + .seconds(10)
        var copied = 0
        while copied < 13, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(20))
            copied = try rowsInTheFileAlone(path)
        }
        #expect(copied >= 13, "the rows committed when the log reached 40 pages are in the file alone: \(copied)")
        #expect(checkpointer.folds.load(ordering: .relaxed) >= 1)
        let all = try await pool.read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM page") }
        #expect(all == 45)
    }

    /// The thread cannot fold (its connection does not open): the committing writer folds the log itself at four
    /// times the size, as SQLite's own checkpoint would, and the log's file stays that size.
    @Test func aLogTheThreadCannotFoldIsFoldedByTheCommitAtFourTimesTheSize() throws {
        let path = temporaryStorePath()
        try FileManager.default.createDirectory(
            atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        let checkpointer = Checkpointer(path: "/nonexistent/relay.sqlite", pages: 20, synchronous: "FULL")
        let pool = try pool(checkpointer, at: path)
        try fill(pool, from: 0, count: 300)
        let pages = try logPages(path)
        #expect(pages <= 80 + 4, "\(pages) pages in the log")
        #expect(try rowsInTheFileAlone(path) >= 200)
    }
}
