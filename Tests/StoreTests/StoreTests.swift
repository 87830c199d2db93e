import AllowanceAPI
import Foundation
import GRDB
import SignalRProtocol
import StoreContract
import Synchronization
import Testing

@testable import Store

func temporaryStorePath() -> String {
    FileManager.default.temporaryDirectory.appending(path: "store-\(UUID())").appending(path: "relay.sqlite").path
}

/// A database file as an older relay left it: migrated up to `migration`, then `fill` writes its rows.
func olderDatabase(upTo migration: String, _ fill: (Database) throws -> Void) throws -> String {
    let path = temporaryStorePath()
    try FileManager.default.createDirectory(
        atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
    let old = try DatabaseQueue(path: path)
    try Schema.migrator.migrate(old, upTo: migration)
    try old.write(fill)
    return path
}

let allMigrations = [
    "v1: children, transactions, inbox, sync state", "v2: outbox", "v3: outbox dead letters", "v4: delivery ledger",
    "v5: latest transaction per child by index", "v6: desktop popups by child", "v7: rows from the server set aside",
    "v8: local writes by child", "v9: muted alerts", "v10: scheduled summaries",
    "v11: dedup index only for rows with a key",
    "v12: children removed on the server", "v13: chat messages edited in place", "v14: muted deliveries",
    "v15: when the database was made",
    "v16: the trace each delivery continues",
    "v17: the newest transactions without a scan",
    "v18: what goes first, found without a scan",
    "v19: a failing sink, for status and /healthz",
    "v20: wish lists and the goals reached",
    "v21: the inbox without AUTOINCREMENT",
    "v22: the inbox keeps what has no row of its own",
    "v23: the checks on each event's rows compare without a temporary index",
    "v24: the newest transactions read child by child",
    "v25: deliveries numbered by their ids",
    "v26: the indexes each event writes hold only what is read",
    "v27: a balance that follows the newest transaction",
]

let alice = UUID(uuidString: "11111111-1111-4111-8111-111111111111")!

func child(_ balance: String) -> Child {
    Child(
        id: alice, firstName: "Alice", lastName: "Example", weeklyAllowance: 10,
        currentBalance: Decimal(string: balance)!)
}

func transaction(_ n: Int, amount: String, type: TransactionType = .credit, after: String) -> Transaction {
    Transaction(
        id: UUID(uuidString: String(format: "00000000-0000-4000-8000-%012d", n))!, childId: alice,
        amount: Decimal(string: amount)!, type: type, description: "t\(n)", balanceAfter: Decimal(string: after)!,
        createdAt: Date(timeIntervalSince1970: 1_795_341_600 + Double(n)), createdByName: "Pat")
}

@Suite struct StoreTests {
    @Test func opensMigratesAndReopensWithTheData() throws {
        let path = temporaryStorePath()
        do {
            let store = try Store.open(path: path)
            #expect(try store.appliedMigrations() == allMigrations)
            try store.storeCaughtUp(children: [child("25.50")], transactions: [])
        }
        let again = try Store.open(path: path)
        #expect(try again.children().map(\.currentBalance) == [Decimal(string: "25.50")!])
    }

    /// A wish list is read again after every balance that moved. Read unchanged, it writes nothing: the write-ahead
    /// log does not grow. The time of the first list stays.
    @Test func aWishListReadAgainUnchangedWritesNothing() throws {
        let store = try Store.open(path: temporaryStorePath())
        try store.storeCaughtUp(children: [child("10.00")], transactions: [])
        let kite = WishListItem(
            id: UUID(), childId: alice, name: "kite", price: 15, url: nil, isPurchased: false, purchasedAt: nil)
        try store.storeWishList(child: alice, items: [kite], at: Date(timeIntervalSince1970: 1_795_341_600))
        let raw = try DatabaseQueue(path: store.path)
        let firstRead = { try raw.read { try String.fetchOne($0, sql: "SELECT wish_list_at FROM child") } }
        let logSize = { try FileManager.default.attributesOfItem(atPath: store.path + "-wal")[.size] as? Int }
        let size = try logSize()
        #expect(try firstRead() == "2026-11-22T10:00:00.000Z")
        try store.storeWishList(child: alice, items: [kite], at: Date())
        #expect(try logSize() == size && firstRead() == "2026-11-22T10:00:00.000Z")
        // A changed list is written; the first read's time stays.
        var cheaper = kite
        cheaper.price = 12
        try store.storeWishList(child: alice, items: [cheaper], at: Date())
        #expect(try logSize()! > size! && firstRead() == "2026-11-22T10:00:00.000Z")
        #expect(try store.goals(child: alice).map(\.item.price) == [12])
    }

    @Test func theCountsStatusShowsFollowInsertsRepeatsAndPrunes() throws {
        let store = try Store.open(path: temporaryStorePath())
        let history = (1...10).map { transaction($0, amount: "1.00", after: "\($0).00") }
        try store.storeCaughtUp(children: [child("10.00")], transactions: history)
        #expect(try store.summary().transactions == 10)
        try store.storeCaughtUp(children: [child("10.00")], transactions: Array(history.suffix(4)))
        #expect(try store.summary().transactions == 10, "a transaction stored again is not counted again")
        _ = try store.apply(.transactionCreated(transaction(11, amount: "1.00", after: "11.00")))
        _ = try store.apply(.balanceUpdated(childId: alice, balance: 11))
        let before = try store.summary()
        #expect(before.transactions == 11)
        #expect(before.inboxRows == 1, "the balance; a transaction's record is its row")
        let pruned = try store.prune(inboxDays: 1, transactionDays: 1, now: Date().addingTimeInterval(3 * 86400))
        #expect(pruned.transactions == 11)
        #expect(pruned.inbox == before.inboxRows)
        let after = try store.summary()
        #expect(after.transactions == 0 && after.inboxRows == 0)
    }

    /// A transaction's record is its row in `txn` (how and when it came included). A balance, which has no row of
    /// its own, is kept in the inbox as it came, each arrival once; but the one right behind its transaction, with
    /// the balance that transaction left, is what that row says already and adds no row.
    @Test func aTransactionIsKeptAsItsRowAndABalanceAsItCameInTheInbox() throws {
        let store = try Store.open(path: temporaryStorePath())
        try store.storeCaughtUp(children: [child("10.00")], transactions: [])
        let t = transaction(1, amount: "2.50", after: "12.50")
        let twelveFifty = HubEvent.balanceUpdated(childId: alice, balance: Decimal(string: "12.50")!)
        _ = try store.apply([.transactionCreated(t), twelveFifty])
        let inbox = {
            try DatabaseQueue(path: store.path).read { db in
                try Row.fetchAll(db, sql: "SELECT kind, payload, received_at FROM inbox ORDER BY seq")
            }
        }
        #expect(try inbox().isEmpty, "the balance right behind its transaction is that row's balance after")
        #expect(try store.children().first?.currentBalance == Decimal(string: "12.50")!)
        _ = try store.apply(twelveFifty)  // alone: the same balance again
        let other = transaction(2, amount: "1.00", after: "13.50")
        _ = try store.apply([.transactionCreated(other), .balanceUpdated(childId: alice, balance: 14)])
        _ = try store.apply([
            .transactionCreated(transaction(3, amount: "1.00", after: "15.00")),
            .balanceUpdated(childId: alice, balance: 16), .balanceUpdated(childId: alice, balance: 15),
        ])
        let rows = try inbox()
        #expect(rows.allSatisfy { !($0["received_at"] as String).isEmpty }, "each arrival's time is kept")
        let balances = try rows.map { row in
            try JSONSerialization.jsonObject(with: Data((row["payload"] as String).utf8)) as? [String: String]
        }
        #expect(
            balances.map { $0?["balance"].flatMap { Decimal(string: $0) } } == [12.5, 14, 16, 15],
            "alone, other than its transaction's, not right behind it: each kept")
        #expect(
            balances[0] == ["event": "BalanceUpdated", "childId": alice.uuidString.lowercased(), "balance": "12.50"])
        let stored = try DatabaseQueue(path: store.path).read { db in
            try Row.fetchOne(
                db,
                sql:
                    "SELECT amount_minor, balance_after_minor, description, received_via, stored_at FROM txn WHERE id = ?",
                arguments: [t.id.uuidString.lowercased()])
        }
        #expect(stored?["amount_minor"] as Int64? == 250 && stored?["balance_after_minor"] as Int64? == 1250)
        #expect(stored?["description"] as String? == "t1")
        #expect(stored?["received_via"] as String? == "hub" && stored?["stored_at"] as String? != nil)
    }

    @Test func aDamagedPageIsFoundByTheIntegrityCheckNotAtOpen() throws {
        let path = temporaryStorePath()
        do {
            let store = try Store.open(path: path)
            let history = (1...3000).map { transaction($0, amount: "1.00", after: "\($0).00") }
            try store.storeCaughtUp(children: [child("3000.00")], transactions: history)
            #expect(try store.integrityProblem() == nil, "a sound file")
            try store.checkpoint()
        }
        // Garbage over a page in the middle of the file (the transactions' pages), the schema's first page intact:
        // bit rot, a bad sector.
        let file = try #require(FileHandle(forUpdatingAtPath: path))
        let size = try file.seekToEnd()
        try file.seek(toOffset: size / 2 / 4096 * 4096 + 8)
        try file.write(contentsOf: Data(repeating: 0x42, count: 4000))
        try file.close()
        // Opening reads no more than the schema: it works, and so would `status` (0.3 s a million transactions faster).
        let damaged = try Store.open(path: path)
        let problem = try #require(try damaged.integrityProblem())
        #expect(
            problem.contains("failed its integrity check") && problem.contains("allowance-relay run --rebuild")
                && problem.contains(path))
    }

    /// A child or a transaction row this version cannot read (a hand edit, a damaged file) is an error that names the
    /// table, the column and the value, not a crash: both lists read the ids with force-unwraps before.
    @Test func anUnreadableChildOrTransactionRowIsAClearErrorNotACrash() throws {
        let store = try Store.open(path: temporaryStorePath())
        try store.storeCaughtUp(
            children: [child("1.00")], transactions: [transaction(1, amount: "1.00", after: "1.00")])
        let raw = try DatabaseQueue(path: store.path)
        try raw.write { try $0.execute(sql: "UPDATE txn SET child_id = 'not-a-uuid'") }
        let transactions = #expect(throws: StoreError.self) { try store.transactions() }
        #expect(
            transactions?.message.contains("txn row: unreadable child_id 'not-a-uuid'") == true,
            "\(String(describing: transactions))")
        #expect(transactions?.description.hasPrefix(store.path + ": ") == true, "the file is named")
        try raw.write { try $0.execute(sql: "UPDATE child SET id = 'alice'") }
        let children = #expect(throws: StoreError.self) { try store.children() }
        #expect(
            children?.message.contains("child row: unreadable id 'alice'") == true, "\(String(describing: children))")
    }

    /// Reads on several threads at once while the writer commits: each read is one snapshot (a balance read twice
    /// in one read is the same, however many commits came between), and a read after the last commit sees it.
    @Test func readsOnSeveralThreadsAtOnceEachSeeOneCommittedState() throws {
        let store = try Store.open(path: temporaryStorePath())
        try store.storeCaughtUp(children: [child("0")], transactions: [])
        let balance = { @Sendable (db: Database) in try Int.fetchOne(db, sql: "SELECT balance_minor FROM child") ?? -1 }
        final class Counts: Sendable {
            let writing = Atomic<Bool>(true), torn = Atomic<Int>(0), reads = Atomic<Int>(0)
        }
        let counts = Counts()
        let finished = DispatchGroup()
        for _ in 0..<4 {
            finished.enter()
            Thread {
                defer { finished.leave() }
                while counts.writing.load(ordering: .acquiring) {
                    let (first, second) = try! store.read { db in
                        let first = try balance(db)
                        usleep(500)  // commits come meanwhile
                        return (first, try balance(db))
                    }
                    if first != second { counts.torn.add(1, ordering: .relaxed) }
                    counts.reads.add(1, ordering: .relaxed)
                }
            }.start()
        }
        for cents in 1...300 { _ = try store.apply([.balanceUpdated(childId: alice, balance: Decimal(cents) / 100)]) }
        counts.writing.store(false, ordering: .releasing)
        finished.wait()
        #expect(counts.reads.load(ordering: .relaxed) > 20, "the reads ran while the writer committed")
        #expect(counts.torn.load(ordering: .relaxed) == 0, "a read saw two states")
        #expect(try store.read(balance) == 300, "the last commit is seen")
    }

    @Test func theWriterTakesTheLargeCacheForABurstAndGivesItBackAfter() throws {
        let store = try Store.open(path: temporaryStorePath())
        let writerCache = { try store.pool.write { db in try Int.fetchOne(db, sql: "PRAGMA cache_size") } }
        #expect(try writerCache() == -Store.Tuning.defaultCacheKiB)
        #expect(
            try store.pool.write { db in try Int.fetchOne(db, sql: "PRAGMA wal_autocheckpoint") }
                == Store.Tuning.checkpointPages)
        #expect(
            try store.read { db in try Int.fetchOne(db, sql: "PRAGMA cache_size") } == -Store.Tuning.readerCacheKiB
        )

        try store.storeCaughtUp(children: [child("25.50")], transactions: [])
        let burst = (0..<Store.Tuning.burstEvents).map { HubEvent.balanceUpdated(childId: alice, balance: Decimal($0)) }
        #expect(try store.apply(burst).allSatisfy { if case .stored = $0 { true } else { false } })
        #expect(try writerCache() == -Store.Tuning.writerCacheKiB)
        _ = try store.apply([.balanceUpdated(childId: alice, balance: 7)])
        #expect(try writerCache() == -Store.Tuning.defaultCacheKiB)
        #expect(try store.children().first?.currentBalance == 7)
    }

    /// When the hub last sent something (`status`, the metrics): a transaction alone counts, as a balance does; one
    /// fetched by a catch-up does not (the catch-up is its own contact).
    @Test func theLastEventIsTheNewestTransactionOrBalanceThatCameOverTheHub() throws {
        let store = try Store.open(path: temporaryStorePath())
        let day = Date(timeIntervalSince1970: 1_795_341_600 + 86400)
        try store.storeCaughtUp(
            children: [child("10.00")], transactions: [transaction(1, amount: "1.00", after: "10.00")], at: day)
        #expect(try store.contact().lastEvent == nil)
        #expect(try store.contact().lastContact == day)
        _ = try store.apply(.transactionCreated(transaction(2, amount: "1.00", after: "11.00")), at: day + 60)
        #expect(try store.contact().lastEvent == day + 60)
        _ = try store.apply(.balanceUpdated(childId: alice, balance: 11), at: day + 120)
        #expect(try store.contact().lastEvent == day + 120)
        #expect(try store.contact().lastContact == day + 120)
        // A catch-up's page stored, the catch-up not complete: contact with the server, not a hub event.
        try store.storeCaughtUp(
            children: [child("12.00")], transactions: [transaction(3, amount: "1.00", after: "12.00")],
            complete: false, at: day + 180)
        #expect(try store.contact().lastEvent == day + 120)
        #expect(try store.contact().lastContact == day + 180)
    }

    @Test func theSameTransactionTwiceIsOneRow() throws {
        let store = try Store.open(path: temporaryStorePath())
        try store.storeCaughtUp(children: [child("25.50")], transactions: [])
        let t = transaction(1, amount: "19.99", after: "45.49")
        #expect(try store.apply(.transactionCreated(t)) == .stored(gap: nil))
        #expect(try store.apply(.transactionCreated(t)) == .duplicate)
        #expect(try store.transactions().count == 1)
        #expect(try store.inbox().isEmpty, "a transaction's record is its row")
        #expect(try store.children().first?.currentBalance == Decimal(string: "45.49")!)
    }

    @Test(arguments: ["0.1", "19.99", "0.01", "12345678.91"])
    func moneyIsExact(_ amount: String) throws {
        let store = try Store.open(path: temporaryStorePath())
        try store.storeCaughtUp(children: [child("0")], transactions: [])
        let t = transaction(7, amount: amount, after: amount)
        _ = try store.apply(.transactionCreated(t))
        let stored = try #require(try store.transactions().first)
        #expect(stored.amount == Decimal(string: amount)!)
        #expect(stored.balanceAfter == Decimal(string: amount)!)
    }

    /// Never rounded: set aside with the reason (one such row must not stop the others).
    @Test func moreThanTwoDecimalsIsRefusedNotRounded() throws {
        let store = try Store.open(path: temporaryStorePath())
        try store.storeCaughtUp(children: [child("0")], transactions: [])
        #expect(
            try store.apply(.transactionCreated(transaction(1, amount: "1.005", after: "1.005")))
                == .rejected(
                    reason:
                        "transaction 00000000-0000-4000-8000-000000000001: its amount 1.005 has more than two decimals",
                    first: true))
        #expect(try store.transactions().isEmpty, "nothing half-written")
        #expect(try store.inbox().isEmpty)
        #expect(try store.rejectedRows().map(\.id) == ["00000000-0000-4000-8000-000000000001"])
    }

    @Test func aTransactionThatDoesNotFollowTheCachedBalanceIsAGap() throws {
        let store = try Store.open(path: temporaryStorePath())
        try store.storeCaughtUp(children: [child("25.50")], transactions: [])
        // 25.50 + 5.00 should give 30.50; 40.00 means something in between was missed.
        #expect(
            try store.apply(.transactionCreated(transaction(1, amount: "5.00", after: "40.00"))) == .stored(gap: alice))
        #expect(
            try store.apply(.balanceUpdated(childId: alice, balance: Decimal(string: "40.00")!)) == .stored(gap: nil))
        #expect(
            try store.apply(.balanceUpdated(childId: alice, balance: Decimal(string: "41.00")!)) == .stored(gap: alice))
        #expect(try store.children().first?.currentBalance == Decimal(string: "41.00")!, "the server's balance wins")
    }

    /// A burst reads a child's newest transaction once and keeps it as it stores more: each balance is still compared
    /// with the newest stored so far, the burst's own included, as when every event is a burst of its own (where
    /// SQLite's index is read each time).
    @Test func aBurstComparesEachBalanceWithTheNewestTransactionStoredSoFar() throws {
        func balance(_ text: String) -> HubEvent { .balanceUpdated(childId: alice, balance: Decimal(string: text)!) }
        var tie = transaction(12, amount: "1.00", after: "31.50")
        tie.createdAt = transaction(10, amount: "5.00", after: "30.50").createdAt
        let events: [HubEvent] = [
            balance("25.50"),  // what t1 left: read from the file
            .transactionCreated(transaction(10, amount: "5.00", after: "30.50")),
            balance("30.50"),  // t10 is the newest now
            .transactionCreated(tie),
            balance("31.50"),  // made at the same time as t10, stored after it: the newest
            .transactionCreated(transaction(5, amount: "1.00", after: "26.50")),  // older than both: came late
            balance("26.50"),  // not what the newest left: something was missed
        ]
        let expected: [ApplyResult] = [
            .stored(gap: nil), .stored(gap: nil), .stored(gap: nil), .stored(gap: nil), .stored(gap: nil),
            .stored(gap: alice), .stored(gap: alice),
        ]
        let first = transaction(1, amount: "25.50", after: "25.50")
        let inOneBurst = try Store.open(path: temporaryStorePath())
        try inOneBurst.storeCaughtUp(children: [child("25.50")], transactions: [first])
        #expect(try inOneBurst.apply(events) == expected)
        let oneByOne = try Store.open(path: temporaryStorePath())
        try oneByOne.storeCaughtUp(children: [child("25.50")], transactions: [first])
        #expect(try events.map { try oneByOne.apply($0) } == expected)
    }

    /// A catch-up asks for the balances; a live event sets Alice's balance before the answer is stored. The
    /// answer is older than the event: it must not overwrite it (found by the connection-reset scenario).
    @Test func aLiveBalanceNewerThanTheCatchUpsAnswerIsKept() throws {
        let store = try Store.open(path: temporaryStorePath())
        try store.storeCaughtUp(children: [child("25.50")], transactions: [], at: Date(timeIntervalSinceNow: -60))
        let asked = Date()
        Thread.sleep(forTimeInterval: 0.01)
        _ = try store.apply(.balanceUpdated(childId: alice, balance: Decimal(string: "30.50")!))
        try store.storeCaughtUp(children: [child("25.50")], transactions: [], balancesAskedAt: asked)
        #expect(try store.children().first?.currentBalance == Decimal(string: "30.50")!, "the newer live balance stays")
        // With no live event since it was asked for, the server's answer wins.
        try store.storeCaughtUp(children: [child("31.00")], transactions: [], balancesAskedAt: Date())
        #expect(try store.children().first?.currentBalance == Decimal(string: "31.00")!)
    }

    @Test func eventsTheCacheCannotPlaceAskForACatchUp() throws {
        let store = try Store.open(path: temporaryStorePath())
        let idOnly = try store.apply(.transactionCreatedId(UUID()))
        let unknownChild = try store.apply(.transactionCreated(transaction(1, amount: "1", after: "1")))
        for result in [idOnly, unknownChild] {
            guard case .needsCatchUp = result else {
                Issue.record("expected a catch-up request, got \(result)")
                continue
            }
        }
    }

    @Test func aCorruptFileGivesAnErrorNamingItAndTheFix() throws {
        let path = temporaryStorePath()
        try FileManager.default.createDirectory(
            atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        try Data(repeating: 0x42, count: 8192).write(to: URL(fileURLWithPath: path))
        do {
            _ = try Store.open(path: path)
            Issue.record("opened garbage")
        } catch {
            #expect(error.path == path && error.code == .unreadable)
            #expect(error.message.contains("allowance-relay run --rebuild"))
        }
        let aside = try Store.moveAside(path: path)
        #expect(FileManager.default.fileExists(atPath: aside))
        #expect(try Store.open(path: path).children().isEmpty, "a fresh database after moving the broken one aside")
    }
}

/// Family money data is the owner's alone, whatever the umask the relay was started with.
@Suite(.serialized) struct FilePermissionTests {
    private func mode(_ path: String) -> mode_t {
        var info = stat()
        return stat(path, &info) == 0 ? info.st_mode & 0o777 : 0
    }

    @Test func theFolderAndEveryDatabaseFileAreTheOwnersOnlyUnderAnOpenUmask() throws {
        let old = umask(0o022)
        defer { umask(old) }
        let path = temporaryStorePath()
        let store = try Store.open(path: path)
        try store.storeCaughtUp(children: [child("1")], transactions: [])  // a write: the WAL and SHM files exist
        #expect(mode((path as NSString).deletingLastPathComponent) == 0o700)
        for suffix in ["", "-wal", "-shm"] {
            #expect(FileManager.default.fileExists(atPath: path + suffix), "\(suffix)")
            #expect(mode(path + suffix) == 0o600, "relay.sqlite\(suffix) is \(String(mode(path + suffix), radix: 8))")
        }
    }

    @Test func aDatabaseLeftReadableByAnOlderVersionIsMadePrivate() throws {
        let path = temporaryStorePath()
        _ = try Store.open(path: path)
        chmod(path, 0o644)
        _ = try Store.open(path: path)
        #expect(mode(path) == 0o600)
    }
}
