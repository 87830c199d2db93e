import AllowanceAPI
import Foundation
import GRDB
import Store
import StoreContract
import Testing

@Suite struct OutboxTests {
    private func seeded() throws -> Store {
        let store = try Store.open(path: temporaryStorePath())
        try store.storeCaughtUp(children: [child("25.50")], transactions: [])
        return store
    }

    @Test func aWriteIsTheLocalTransactionTheBalanceAndTheOutboxRowTogether() throws {
        let store = try seeded()
        let e = try store.enqueueTransaction(
            child: alice, amount: Decimal(string: "4.50")!, type: .debit, description: "Kite")
        #expect(e.state == .pending && e.attempts == 0)
        #expect(try store.children().first?.currentBalance == Decimal(string: "21.00")!)
        let local = try #require(try store.transactions().first)
        #expect(local.id == e.localTransactionId && local.balanceAfter == Decimal(string: "21.00")!)
        #expect(try store.dueOutbox().map(\.seq) == [e.seq])
    }

    /// A row this version cannot read (a damaged file, a hand edit) is an error that names the row and the column,
    /// not a crash: the records were read with force-unwraps before.
    @Test func anUnreadableOutboxRowIsAClearErrorNotACrash() throws {
        let store = try seeded()
        let e = try store.enqueueTransaction(child: alice, amount: 1, type: .credit, description: "Chores")
        try DatabaseQueue(path: store.path).write { db in
            try db.execute(sql: "UPDATE outbox SET child_id = 'not-a-uuid' WHERE seq = ?", arguments: [e.seq])
        }
        do {
            _ = try store.outbox()
            Issue.record("a damaged row was read")
        } catch {
            #expect("\(error)".contains("outbox row \(e.seq): unreadable child_id 'not-a-uuid'"), "\(error)")
        }
    }

    @Test func sentReplacesTheLocalTransactionWithTheServers() throws {
        let store = try seeded()
        let e = try store.enqueueTransaction(child: alice, amount: 5, type: .credit, description: "Chores")
        try store.markInFlight(e.seq)
        let server = transaction(9, amount: "5", after: "30.50")
        try store.outboxSent(e.seq, server: server)
        #expect(try store.transactions().map(\.id) == [server.id])
        #expect(try store.outbox().first?.state == .sent && store.outbox().first?.attempts == 1)
        #expect(try store.dueOutbox().isEmpty)
        #expect(try store.apply(.transactionCreated(server)) == .duplicate, "its hub echo is not stored twice")
    }

    @Test func rejectedUndoesTheLocalWrite() throws {
        let store = try seeded()
        let e = try store.enqueueTransaction(child: alice, amount: 5, type: .credit, description: "Chores")
        try store.outboxRejected(e.seq, reason: "HTTP 400: no")
        #expect(try store.transactions().isEmpty)
        #expect(try store.children().first?.currentBalance == Decimal(string: "25.50")!)
        #expect(try store.outbox().first?.lastError == "HTTP 400: no")
    }

    @Test func inFlightAfterACrashIsSentAgainAndRetriesWaitTheirTurn() throws {
        let store = try seeded()
        let e = try store.enqueueTransaction(child: alice, amount: 1, type: .credit, description: "a")
        try store.markInFlight(e.seq)
        #expect(try store.dueOutbox().isEmpty)
        #expect(try store.requeueInFlight() == 1)
        #expect(
            try store.dueOutbox().map(\.attempts) == [0], "an attempt counts with its outcome, and none was recorded")
        try store.outboxRetry(e.seq, error: "HTTP 503", retryAt: Date().addingTimeInterval(60))
        #expect(try store.outbox().first?.attempts == 1)
        #expect(try store.dueOutbox().isEmpty)
        #expect(try store.dueOutbox(at: Date().addingTimeInterval(61)).count == 1)
    }

    @Test func clearErrorsForWhatCannotBeQueued() throws {
        let store = try seeded()
        #expect {
            try store.enqueueTransaction(child: alice, amount: 100, type: .debit, description: "too much")
        } throws: {
            ($0 as? StoreError)?.message == "Insufficient funds: the balance is 25.50, the debit 100.00."
        }
        #expect { try store.enqueueTransaction(child: UUID(), amount: 1, type: .credit, description: "x") } throws: {
            ($0 as? StoreError)?.message.contains("is not in the cache") == true
        }
        for i in 0..<100 {
            _ = try store.enqueueTransaction(child: alice, amount: 1, type: .credit, description: "\(i)")
        }
        #expect {
            try store.enqueueTransaction(child: alice, amount: 1, type: .credit, description: "one more")
        } throws: {
            ($0 as? StoreError)?.message.hasPrefix("The outbox is full (100 writes waiting).") == true
        }
        _ = try store.enqueueTransaction(
            child: alice, amount: 1, type: .credit, description: "under a raised limit", limit: 101)
    }
}

@Suite struct OutboxManagementTests {
    @Test func aDeadWriteIsUndoneAndCanBeRetriedWithFreshAttempts() throws {
        let store = try Store.open(path: temporaryStorePath())
        try store.storeCaughtUp(children: [child("25.50")], transactions: [])
        let a = try store.enqueueTransaction(child: alice, amount: 5, type: .credit, description: "a")
        try store.markInFlight(a.seq)
        try store.outboxDead(a.seq, reason: "gave up after 1 attempt(s): HTTP 503")
        #expect(try store.children().first?.currentBalance == Decimal(string: "25.50")!, "the local effect is undone")
        #expect(try store.outbox().first?.state == .dead)
        #expect(try store.summary().outboxRejected == 1)
        try store.retryOutbox(a.seq)
        let again = try #require(try store.outbox().first)
        #expect(again.state == .pending && again.attempts == 0)
        #expect(try store.children().first?.currentBalance == Decimal(string: "30.50")!)
    }

    /// As on PostgreSQL: a write retried for a child whose row is gone (a hand edit, a damaged file) is queued again
    /// without a stand-in, where one counted from a balance of 0 was written before.
    @Test func aWriteRetriedForAChildWhoseRowIsGoneWaitsWithoutAStandIn() throws {
        let store = try Store.open(path: temporaryStorePath())
        try store.storeCaughtUp(children: [child("25.50")], transactions: [])
        let a = try store.enqueueTransaction(child: alice, amount: 5, type: .credit, description: "a")
        try store.outboxRejected(a.seq, reason: "HTTP 400")
        let raw = try DatabaseQueue(path: store.path)
        try raw.write { db in try db.execute(sql: "DELETE FROM child WHERE id = ?", arguments: [alice.lowercased]) }
        try store.retryOutbox(a.seq)
        let (rows, state, attempts) = try raw.read { db in
            (
                try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM txn") ?? -1,
                try String.fetchOne(db, sql: "SELECT state FROM outbox WHERE seq = ?", arguments: [a.seq]),
                try Int.fetchOne(db, sql: "SELECT attempts FROM outbox WHERE seq = ?", arguments: [a.seq])
            )
        }
        #expect(rows == 0, "no stand-in")
        #expect(state == "pending" && attempts == 0, "due again, with a fresh count of attempts")
    }

    @Test func aRejectedWriteCanBeRetriedAndAPendingOneDropped() throws {
        let store = try Store.open(path: temporaryStorePath())
        try store.storeCaughtUp(children: [child("25.50")], transactions: [])
        let a = try store.enqueueTransaction(child: alice, amount: 5, type: .credit, description: "a")
        try store.outboxRejected(a.seq, reason: "HTTP 400")
        #expect(try store.children().first?.currentBalance == Decimal(string: "25.50")!)
        try store.retryOutbox(a.seq)
        #expect(
            try store.children().first?.currentBalance == Decimal(string: "30.50")!,
            "retrying restores the local effect")
        #expect(try store.dueOutbox().map(\.seq) == [a.seq])
        try store.dropOutbox(a.seq)
        #expect(try store.outbox().isEmpty)
        #expect(try store.transactions().isEmpty)
        #expect(try store.children().first?.currentBalance == Decimal(string: "25.50")!)
        #expect(throws: StoreError.self) { try store.dropOutbox(a.seq) }
    }
}

@Suite struct SyncStatusTests {
    @Test func theStateRoundTripsThroughTheDatabase() throws {
        let store = try Store.open(path: temporaryStorePath())
        #expect(try store.syncStatus() == nil)
        let when = Date(timeIntervalSince1970: 1_795_341_600)
        let s = SyncStatus(
            phase: .offline, detail: "backend unreachable: HTTP 503", since: when, nextRetry: when.addingTimeInterval(8)
        )
        try store.setSyncStatus(s)
        #expect(try store.syncStatus() == s)
    }
}

@Suite struct RetentionTests {
    @Test func oldInboxRowsArePrunedAndTransactionsOnlyWhenAsked() throws {
        let store = try Store.open(path: temporaryStorePath())
        try store.storeCaughtUp(children: [child("0")], transactions: [])
        let long = Date(timeIntervalSince1970: 1_795_341_600)
        // Each balance on its own (one right behind its transaction is that row's, and has no inbox row).
        _ = try store.apply(.transactionCreated(transaction(1, amount: "1", after: "1")), at: long)
        _ = try store.apply(.balanceUpdated(childId: alice, balance: 1), at: long)
        let later = long.addingTimeInterval(8 * 86400)
        _ = try store.apply(.transactionCreated(transaction(2, amount: "1", after: "2")), at: later)
        _ = try store.apply(.balanceUpdated(childId: alice, balance: 2), at: later)
        _ = try store.enqueueTransaction(child: alice, amount: 1, type: .credit, description: "waiting", at: long)
        let now = long.addingTimeInterval(9 * 86400)
        #expect(try store.prune(now: now) == (inbox: 1, transactions: 0))
        #expect(try store.inbox().count == 1)
        #expect(try store.transactions().count == 3, "transactions are kept by default")
        // created_at of transaction(n) is 2026-11-22 + n seconds: both are older than 1 day at `now`.
        #expect(try store.prune(transactionDays: 1, now: now).transactions == 2)
        #expect(
            try store.transactions().map(\.description) == ["waiting"], "a local write still waiting is never pruned")
    }
}
