import Alerts
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

    /// The alerts carry the balances in cents when the amounts have them, and are then the same events as made from
    /// the Decimals; a balance with more decimals (a server that sends them) keeps its Decimal, exactly.
    @Test func theAlertsCarryTheBalancesInCentsOrExactly() throws {
        let at = Date(timeIntervalSince1970: 1_795_341_700)
        guard case .transactionCreated(let t) = created(kid, after: Decimal(string: "12.5")!) else { return }
        let alert = HubEventPolicy.alert(t, child: kid, name: "Ann", balanceBefore: 1150, at: at, traceParent: "tp")
        #expect(alert.balanceCents == 1250 && alert.previousBalanceCents == 1150)
        var fromDecimals = RelayEvent(
            kind: .transactionCreated, at: at, childId: kid, childName: "Ann", transaction: t,
            balance: Decimal(string: "12.50")!, previousBalance: Decimal(string: "11.50")!)
        fromDecimals.traceParent = "tp"
        #expect(alert == fromDecimals)

        let exact = Decimal(string: "12.505")!
        let balance = HubEventPolicy.alert(
            balance: exact, cents: nil, child: kid, name: "Ann", previous: 1250, at: at, traceParent: nil)
        #expect(balance.balance == exact && balance.balanceCents == nil && balance.previousBalanceCents == 1250)
        #expect(balance.balanceChanged)
        let inCents = HubEventPolicy.alert(
            balance: Decimal(string: "12.5")!, cents: 1250, child: kid, name: "Ann", previous: 1250, at: at,
            traceParent: nil)
        #expect(inCents.balance == Decimal(string: "12.50") && !inCents.balanceChanged)
    }
}
