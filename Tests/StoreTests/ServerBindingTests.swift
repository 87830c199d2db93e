import AllowanceAPI
import Foundation
import StoreContract
import Testing

@testable import Store

/// The cache belongs to the server (and family) it was filled from: another server's data is refused, never merged.
@Suite struct ServerBindingTests {
    @Test func aTransactionIdTheCacheKnowsWithOtherContentIsRefusedAndNothingIsStored() throws {
        let store = try Store.open(path: temporaryStorePath())
        try store.storeCaughtUp(children: [child("30.50")], transactions: [])
        let lego = transaction(1, amount: "26", type: .debit, after: "4.50")
        #expect(try store.apply(.transactionCreated(lego)) == .stored(gap: nil))
        var other = transaction(1, amount: "4.25", after: "8.75")  // the same id, from a reset server
        other.description = "Birthday gift"
        let next = transaction(2, amount: "1", after: "5.50")
        #expect { try store.apply([.transactionCreated(next), .transactionCreated(other)]) } throws: { error in
            guard let e = error as? StoreError, e.isConflict else { return false }
            return e.message.contains("transaction 00000000-0000-4000-8000-000000000001 is cached as Alice -26.00")
                && e.message.contains("the server now says Alice +4.25")
                && e.message.hasSuffix("allowance-relay run --rebuild")
        }
        #expect(
            try store.transactions().map(\.description) == ["t1"], "the burst with the contradiction stored nothing")
        #expect(try store.children().first?.currentBalance == Decimal(string: "4.50")!)
        #expect(
            try store.apply(.transactionCreated(lego)) == .duplicate, "the same transaction again is only a duplicate")
        // A catch-up page that contradicts the cache is refused as a whole too.
        #expect { try store.storeCaughtUp(children: [child("8.75")], transactions: [next, other]) } throws: {
            ($0 as? StoreError)?.isConflict == true
        }
        #expect(try store.transactions().count == 1)
    }

    /// Servers send times finer than the millisecond the cache keeps (found by the crash suite: every repeat
    /// of such a transaction was taken for another server's).
    @Test func theSameTransactionWithATimeFinerThanAMillisecondIsNoConflict() throws {
        let store = try Store.open(path: temporaryStorePath())
        try store.storeCaughtUp(children: [child("0")], transactions: [])
        var t = transaction(1, amount: "1", after: "1")
        t.createdAt = Date(timeIntervalSince1970: 1_795_341_600.302_987_6)
        #expect(try store.apply(.transactionCreated(t)) == .stored(gap: nil))
        #expect(try store.apply(.transactionCreated(t)) == .duplicate)
        #expect(try store.storeCaughtUp(children: [child("1")], transactions: [t]) == 0)
    }

    @Test func theCacheIsBoundToTheFirstServersFamily() throws {
        let store = try Store.open(path: temporaryStorePath())
        let home = URL(string: "https://pat:hunter2@allowance.example.org/?x=1")!
        #expect(try store.bindServer(ServerIdentity(url: home, userId: "u1", familyId: "f1")) == nil)
        #expect(try store.bindServer(ServerIdentity(url: home, userId: "u1", familyId: "f1")) == nil)
        #expect { try store.bindServer(ServerIdentity(url: home, userId: "u2", familyId: "f2")) } throws: { error in
            let e = error as? StoreError
            return e?.isConflict == true && e!.message.contains("(user u1, family f1)")
                && !e!.message.contains("hunter2")
        }
        let moved = try store.bindServer(
            ServerIdentity(url: URL(string: "https://new.example.org")!, userId: "u1", familyId: "f1"))
        #expect(
            moved
                == "the server moved from https://allowance.example.org to https://new.example.org (same family): the cache carries on"
        )
    }

    @Test func withoutAccountIdsTheURLIsTheIdentity() throws {
        let store = try Store.open(path: temporaryStorePath())
        #expect(try store.bindServer(ServerIdentity(url: URL(string: "http://127.0.0.1:5000/")!)) == nil)
        #expect { try store.bindServer(ServerIdentity(url: URL(string: "http://127.0.0.1:5001")!)) } throws: {
            ($0 as? StoreError)?.message.hasPrefix(
                "The cache was filled from http://127.0.0.1:5000; the configuration now points at http://127.0.0.1:5001."
            ) == true
        }
    }
}
