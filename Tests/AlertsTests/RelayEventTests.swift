import Alerts
import AllowanceAPI
import Foundation
import Testing

/// An alert as the ledger stores it: written once, read back into the same value.
@Suite struct RelayEventTests {
    static let spend = Transaction(
        id: UUID(uuidString: "6F9619FF-8B86-D011-B42D-00C04FC964FF")!,
        childId: UUID(uuidString: "0B5E1C2A-0000-4000-8000-000000000001")!,
        amount: Decimal(string: "3.5")!, type: .debit, description: "Comic \"Tintin\" ✓",
        balanceAfter: Decimal(string: "21.25")!,
        createdAt: Date(timeIntervalSince1970: 1_764_000_000.125), createdByName: "Alice")

    @Test func aTransactionAlertReadsBackAsItWasWritten() throws {
        let event = RelayEvent(
            kind: .transactionCreated, at: Date(timeIntervalSince1970: 1_764_000_001.5), childId: Self.spend.childId,
            childName: "Alice",
            transaction: Self.spend, balance: Decimal(string: "21.25")!, previousBalance: Decimal(string: "24.75")!,
            caughtUp: true,
            detail: "line one\nline two")
        let read = try RelayEvent(json: event.json)
        #expect(read == event)
        // Money as exact decimal strings, ids lowercased: the documented shape.
        let text = event.jsonText()
        #expect(text.contains(#""amount":"3.50""#) && text.contains(#""balance":"21.25""#), "\(text)")
        #expect(text.contains(#""id":"6f9619ff-8b86-d011-b42d-00c04fc964ff""#), "\(text)")
        // The ids and dates, written into the bytes in place, byte for byte where they stand.
        #expect(
            text.hasPrefix(
                #"{"kind":"transaction.created","at":"2025-11-24T16:00:01.500Z","childId":"0b5e1c2a-0000-4000-8000-000000000001","childName":"Alice","transaction":{"id":"6f9619ff-8b86-d011-b42d-00c04fc964ff","childId":"0b5e1c2a-0000-4000-8000-000000000001","type":"Debit","amount":"3.50","#
            ), "\(text)")
        #expect(text.contains(#""createdAt":"2025-11-24T16:00:00.125Z","createdByName":"Alice"}"#), "\(text)")
    }

    @Test func aDigestKeepsItsTransactionsInOrder() throws {
        var later = Self.spend
        later.id = UUID(uuidString: "6F9619FF-8B86-D011-B42D-00C04FC96500")!
        later.amount = Decimal(string: "1.25")!
        let event = RelayEvent(
            kind: .digest, at: Date(timeIntervalSince1970: 1_764_000_100), childId: Self.spend.childId, count: 2,
            total: Decimal(string: "-4.75")!, transactions: [Self.spend, later])
        let read = try RelayEvent(json: event.json)
        #expect(read.transactions?.map(\.id) == [Self.spend.id, later.id])
        #expect(read == event)
    }

    @Test func anUnknownKindIsACleanError() {
        #expect(throws: APIError.self) { try RelayEvent(json: .object([("kind", .string("balance.exploded"))])) }
    }

    /// Each kind hashes as its own case (not its text): a set of every kind keeps them apart, and no two share a hash.
    @Test func everyKindHashesApart() {
        let all = RelayEvent.Kind.allCases
        #expect(Set(all).count == all.count)
        #expect(Set(all.map(\.hashValue)).count == all.count)
        for kind in all { #expect(Set(all).contains(kind) && !Set(all.filter { $0 != kind }).contains(kind)) }
    }

    /// A mask of kinds holds exactly the kinds it was made of, each apart from the others (a rule's kinds, asked
    /// for every event planned).
    @Test func aKindMaskHoldsExactlyItsKinds() {
        let all = RelayEvent.Kind.allCases
        #expect(all.count <= 16, "one bit each in a 16-bit word")
        for kind in all {
            #expect(RelayEvent.KindMask([kind]).contains(kind))
            #expect(!RelayEvent.KindMask(all.filter { $0 != kind }).contains(kind))
        }
        let some = RelayEvent.KindMask([.transactionCreated, .balanceLow, .goalPurchased])
        #expect(all.filter(some.contains) == [.transactionCreated, .balanceLow, .goalPurchased])
        #expect(all.filter(RelayEvent.KindMask([]).contains).isEmpty)
    }

    /// An event whose balances come in cents is the event made from the same Decimals: equal, the same JSON, the
    /// same change; a balance with more than two decimals keeps its Decimal and still compares.
    @Test func balancesInCentsAreTheSameEventAsDecimals() throws {
        let at = Date(timeIntervalSince1970: 1_764_000_001.5)
        let fromCents = RelayEvent(
            kind: .transactionCreated, at: at, childId: Self.spend.childId, childName: "Alice", transaction: Self.spend,
            balanceCents: 2125, previousBalanceCents: -475)
        let fromDecimals = RelayEvent(
            kind: .transactionCreated, at: at, childId: Self.spend.childId, childName: "Alice", transaction: Self.spend,
            balance: Decimal(string: "21.25")!, previousBalance: Decimal(string: "-4.75")!)
        #expect(fromCents == fromDecimals)
        #expect(fromCents.jsonText() == fromDecimals.jsonText())
        #expect(fromCents.jsonText().contains(#""balance":"21.25","previousBalance":"-4.75""#))
        #expect(fromCents.balance == Decimal(string: "21.25"))
        #expect(fromCents.balanceChanged && fromDecimals.balanceChanged)
        #expect(try RelayEvent(json: fromCents.json) == fromCents)

        var same = fromCents
        same.previousBalance = Decimal(string: "21.250")
        #expect(!same.balanceChanged, "21.250 is 21.25")
        same.previousBalance = Decimal(string: "21.251")
        #expect(same.previousBalanceCents == nil && same.balanceChanged)
        #expect(same.jsonText().contains(#""previousBalance":"21.251""#), "written as it came, not rounded")
        #expect(try RelayEvent(json: same.json).previousBalance == Decimal(string: "21.251"), "and read back exactly")
        same.balance = Decimal(string: "21.251")
        #expect(!same.balanceChanged)
        same.balance = nil
        #expect(same.balanceCents == nil && !same.balanceChanged)
    }
}
