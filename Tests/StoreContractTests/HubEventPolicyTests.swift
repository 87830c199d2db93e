import AllowanceAPI
import Foundation
import StoreContract
import Testing

/// Which balance the transaction before it records: the hub sends each transaction's new balance right behind it.
@Suite struct HubEventPolicyTests {
    let kid = UUID(uuidString: "11111111-1111-4111-8111-111111111111")!
    let other = UUID(uuidString: "22222222-2222-4222-8222-222222222222")!

    func created(_ child: UUID, after: Decimal) -> HubEvent {
        .transactionCreated(
            Transaction(
                id: UUID(), childId: child, amount: 1, type: .credit, description: "x", balanceAfter: after,
                createdAt: Date(timeIntervalSince1970: 1_795_341_600), createdByName: "Pat"))
    }

    @Test func aBalanceIsRecordedOnlyByItsStoredTransactionRightBeforeIt() {
        let balance = HubEvent.balanceUpdated(childId: kid, balance: Decimal(string: "12.50")!)
        let before = created(kid, after: Decimal(string: "12.5")!)
        #expect(HubEventPolicy.isRecorded(balance, byPrevious: before, storedAs: .stored(gap: nil)))
        #expect(HubEventPolicy.isRecorded(balance, byPrevious: before, storedAs: .duplicate), "its row is there")
        #expect(HubEventPolicy.isRecorded(balance, byPrevious: before, storedAs: .stored(gap: kid)))
        let notStored: [ApplyResult?] = [
            .needsCatchUp(reason: "unknown child"), .rejected(reason: "0", first: true), nil,
        ]
        for result in notStored {
            #expect(
                !HubEventPolicy.isRecorded(balance, byPrevious: before, storedAs: result),
                "\(String(describing: result))")
        }
        #expect(!HubEventPolicy.isRecorded(balance, byPrevious: created(kid, after: 13), storedAs: .stored(gap: nil)))
        #expect(
            !HubEventPolicy.isRecorded(balance, byPrevious: created(other, after: 12.5), storedAs: .stored(gap: nil)))
        #expect(!HubEventPolicy.isRecorded(balance, byPrevious: nil, storedAs: nil), "first in its burst")
        #expect(!HubEventPolicy.isRecorded(balance, byPrevious: balance, storedAs: .stored(gap: nil)))
        #expect(!HubEventPolicy.isRecorded(before, byPrevious: before, storedAs: .duplicate), "not a balance")
    }
}
