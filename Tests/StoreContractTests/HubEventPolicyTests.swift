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

    /// The alerts carry the balances in cents, and are then the same events as made from the Decimals.
    @Test func theAlertsCarryTheBalancesInCents() throws {
        let at = Date(timeIntervalSince1970: 1_795_341_700)
        guard case .transactionCreated(let t) = created(kid, after: Decimal(string: "12.5")!) else { return }
        let alert = HubEventPolicy.alert(t, cents: try t.cents(), name: "Ann", at: at, traceParent: "tp")
        #expect(alert.balanceCents == 1250 && alert.previousBalanceCents == 1150)
        var fromDecimals = RelayEvent(
            kind: .transactionCreated, at: at, childId: kid, childName: "Ann", transaction: t,
            balance: Decimal(string: "12.50")!, previousBalance: Decimal(string: "11.50")!)
        fromDecimals.traceParent = "tp"
        #expect(alert == fromDecimals)

        let inCents = HubEventPolicy.alert(
            balance: 1250, child: kid, name: "Ann", previous: 1250, at: at, traceParent: nil)
        #expect(inCents.balance == Decimal(string: "12.50") && !inCents.balanceChanged)
    }

    /// A server transaction is kept with its cents, or set aside with the reason: never kept with figures it lacks.
    @Test func aTransactionIsKeptWithItsCentsOrSetAside() {
        let now = Date(timeIntervalSince1970: 1_795_341_700)
        func transaction(amount: String, after: String) -> Transaction {
            Transaction(
                id: UUID(uuidString: "33333333-3333-4333-8333-333333333333")!, childId: kid,
                amount: Decimal(string: amount)!, type: .debit, description: "x", balanceAfter: Decimal(string: after)!,
                createdAt: now, createdByName: "Pat")
        }
        guard case .keep(let cents) = HubEventPolicy.keeping(transaction(amount: "2.5", after: "10"), now: now) else {
            Issue.record("a transaction in cents is kept")
            return
        }
        #expect(cents.amount == 250 && cents.balanceAfter == 1000 && cents.balanceBefore == 1250)
        for (amount, after, reason) in [
            ("2.505", "10", "its amount 2.505 has more than two decimals"),
            ("2.5", "10.001", "its balanceAfter 10.001 has more than two decimals"),
            ("0", "10", "its amount 0 is not above 0"),
        ] {
            guard case .setAside(let row) = HubEventPolicy.keeping(transaction(amount: amount, after: after), now: now)
            else {
                Issue.record("\(amount) after \(after) is not kept")
                continue
            }
            #expect(row.id == "33333333-3333-4333-8333-333333333333" && row.childId == kid && row.reason == reason)
            #expect(row.payload.contains(amount))
        }
    }

    /// A balance the cache cannot hold (more than two decimals) is a row set aside, named for its child and figure;
    /// the alert for it says what it was.
    @Test func aBalanceWithMoreThanTwoDecimalsIsSetAsideAsARow() throws {
        let row = HubEventPolicy.setAside(balance: Decimal(string: "12.505")!, child: kid)
        let child = kid.uuidString.lowercased()
        #expect(row.id == "balance:\(child):12.505" && row.childId == kid)
        #expect(row.reason == "its balance 12.505 has more than two decimals")
        #expect(row.payload.contains("12.505") && row.payload.contains(child))
        #expect(
            HubEventPolicy.rejected(row, first: true)
                == .rejected(
                    reason: "balance for child \(child): its balance 12.505 has more than two decimals", first: true))
        let alert = HubEventPolicy.alert(
            setAside: row, childName: "Ann", at: Date(timeIntervalSince1970: 1_795_341_700), traceParent: nil)
        #expect(alert.kind == .syncRejected && alert.childName == "Ann")
        #expect(
            alert.detail
                == "the server's balance for child \(child) was not stored: its balance 12.505 has more than two decimals"
        )
    }
}
