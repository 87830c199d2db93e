import AllowanceAPI
import Foundation
import GRDB
import StoreContract
import Testing

@testable import Store

/// A child's balance that follows its newest transaction (schema v27): a stream of hub transactions, each with its
/// balance right behind it, writes no page of the child table; the balance and its time read as if each had been
/// written, and every other write finds the balance where the stream left it.
@Suite struct FollowingBalanceTests {
    /// The pages a write-ahead log holds, in order, read from the file itself: each frame's page number (its first
    /// four bytes, big-endian; 24-byte frame headers, each with the salts of the 32-byte file header at 8 and 12),
    /// up to the last commit.
    func loggedPages(_ path: String, pageSize: Int = 4096) throws -> [Int] {
        let log = try Data(contentsOf: URL(fileURLWithPath: path + "-wal"))
        func word(_ at: Int) -> Int { log[at..<at + 4].reduce(0) { $0 << 8 | Int($1) } }
        var pages: [Int] = []
        var committed = 0
        var offset = 32
        while offset + 24 + pageSize <= log.count, word(offset + 8) == word(16), word(offset + 12) == word(20) {
            pages.append(word(offset))
            if word(offset + 4) != 0 { committed = pages.count }
            offset += 24 + pageSize
        }
        return Array(pages.prefix(committed))
    }

    func at(_ second: Double) -> Date { Date(timeIntervalSince1970: 1_795_342_000 + second) }

    /// A new store whose one child, Alice, has 10.00 from a catch-up at second 0.
    func aliceWithTen() throws -> Store {
        let store = try Store.open(path: temporaryStorePath())
        try store.storeCaughtUp(children: [child("10.00")], transactions: [], at: at(0))
        return store
    }

    /// Alice's balance, and the time it was set (second `second`), as the store's readers say them.
    func expectBalance(
        _ store: Store, _ balance: Decimal, setAt second: Double, sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        #expect(try store.currentBalance(child: alice) == balance, sourceLocation: sourceLocation)
        #expect(try store.balanceTimes()[alice] == at(second), sourceLocation: sourceLocation)
    }

    /// Transaction `n` through the hub, with its balance behind it, as the hub sends them.
    @discardableResult
    func hub(_ store: Store, _ n: Int, after: String, at second: Double) throws -> [ApplyResult] {
        let t = transaction(n, amount: "1.00", after: after)
        return try store.apply(
            [.transactionCreated(t), .balanceUpdated(childId: alice, balance: t.balanceAfter)], at: at(second))
    }

    @Test func aStreamOfTransactionsWritesNoPageOfTheChildTable() throws {
        let store = try aliceWithTen()
        let raw = try DatabaseQueue(path: store.path)
        let childPages = try raw.read { try Int.fetchSet($0, sql: "SELECT pageno FROM dbstat WHERE name = 'child'") }
        try hub(store, 1, after: "11.00", at: 1)  // the first sets the flag: the child's row is written once
        let before = try loggedPages(store.path).count
        for n in 2...6 {
            // Each burst starts from the balance it follows: its transaction shows no gap.
            #expect(try hub(store, n, after: "\(10 + n).00", at: Double(n)) == [.stored(gap: nil), .stored(gap: nil)])
        }
        let written = try loggedPages(store.path).dropFirst(before)
        #expect(written.count >= 5, "five commits, each with its pages: \(written)")
        #expect(Set(written).isDisjoint(with: childPages), "pages \(written), the child's \(childPages)")
        #expect(try store.children().map(\.currentBalance) == [16])
        #expect(try store.currentBalance(child: alice) == 16)
        #expect(try store.balanceTimes()[alice] == at(6), "the time of the burst that set it")
        // The row itself still says what the first burst wrote: the readers above did not read it as it stands.
        #expect(try raw.read { try Int.fetchOne($0, sql: "SELECT balance_minor FROM child") } == 1100)
        // Opened again, the same.
        let again = try Store.open(path: store.path)
        #expect(try again.children().map(\.currentBalance) == [16])
    }

    /// Settling, which the daemon does at a clean stop before its checkpoint, writes each following balance into its
    /// row: the file alone, read with SQLite by an older release or by hand, then says every balance and its time.
    @Test func settlingWritesEachFollowingBalanceIntoItsRow() throws {
        let store = try aliceWithTen()
        for n in 1...3 { try hub(store, n, after: "\(10 + n).00", at: Double(n)) }
        let raw = try DatabaseQueue(path: store.path)
        let row = {
            try raw.read { try Row.fetchOne($0, sql: "SELECT balance_minor, updated_at, balance_follows FROM child") }
        }
        #expect(try row()?["balance_minor"] == 1100, "written by the first burst only")
        try store.settleBalances()
        #expect(try row() == ["balance_minor": 1300, "updated_at": "2026-11-22T10:06:43.000Z", "balance_follows": 0])
        try expectBalance(store, 13, setAt: 3)
    }

    @Test func aBalanceOtherThanTheNewestTransactionsIsWrittenAsItCame() throws {
        let store = try aliceWithTen()
        try hub(store, 5, after: "11.00", at: 1)
        try hub(store, 6, after: "12.00", at: 2)
        // An older transaction, late: its balance after it is the last word, as before (not the newest's).
        _ = try store.apply(.transactionCreated(transaction(3, amount: "1.00", after: "9.00")), at: at(3))
        try expectBalance(store, 9, setAt: 3)
        // A balance the server worked out on its own, after the newest transaction.
        try hub(store, 7, after: "13.00", at: 4)
        _ = try store.apply(.balanceUpdated(childId: alice, balance: 20), at: at(5))
        try expectBalance(store, 20, setAt: 5)
    }

    @Test func aWriteACatchUpAndAPruneFindTheBalanceWhereTheStreamLeftIt() throws {
        let store = try aliceWithTen()
        try hub(store, 1, after: "11.00", at: 1)
        try hub(store, 2, after: "12.00", at: 2)
        // A write made here counts on top of it, and is taken off again when the server refuses it.
        let write = try store.enqueueTransaction(child: alice, amount: 3, type: .debit, description: "kite", at: at(3))
        #expect(try store.currentBalance(child: alice) == 9)
        try hub(store, 3, after: "13.00", at: 4)
        #expect(try store.currentBalance(child: alice) == 10, "the server's 13.00 and the write waiting")
        try store.outboxRejected(write.seq, reason: "no", at: at(5))
        #expect(try store.currentBalance(child: alice) == 13)
        // A catch-up's answer, asked for before the last hub burst, does not overwrite it; asked after, it does.
        try hub(store, 4, after: "14.00", at: 6)
        try store.storeCaughtUp(children: [child("13.00")], transactions: [], balancesAskedAt: at(5.5), at: at(7))
        #expect(try store.currentBalance(child: alice) == 14)
        try hub(store, 5, after: "15.00", at: 8)
        try store.storeCaughtUp(children: [child("15.50")], transactions: [], balancesAskedAt: at(8.5), at: at(9))
        #expect(try store.currentBalance(child: alice) == Decimal(string: "15.50")!)
        // Pruning every transaction it was read from leaves the balance.
        try hub(store, 6, after: "16.00", at: 10)
        try hub(store, 7, after: "17.00", at: 11)
        let pruned = try store.prune(transactionDays: 1, now: Date().addingTimeInterval(400 * 86400))
        #expect(pruned.transactions == 7)
        try expectBalance(store, 17, setAt: 11)
    }
}
