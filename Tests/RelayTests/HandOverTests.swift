import Alerts
import Foundation
import StoreContract
import Testing

@testable import Relay
@testable import Store

@Suite struct HandOverTests {
    func delivery(_ n: Int) -> Delivery {
        Delivery(
            id: "dlv_\(n)", sink: "s", rule: "r", kind: .transactionCreated, childId: nil, urgency: .normal,
            alert: "{}", digest: false,
            state: .pending, attempts: 0, nextAttemptAt: Date(), createdAt: Date())
    }

    @Test func whatIsHandedOverIsTakenOnceInOrder() {
        let h = HandOver(limit: 8)
        h.put([delivery(1), delivery(2)])
        h.put([delivery(3)])
        #expect(h.take()?.map(\.id) == ["dlv_1", "dlv_2", "dlv_3"])
        #expect(h.take()?.isEmpty == true, "taken means gone")
    }

    /// A worker that is paused or busy while a burst is planned does not hold the burst in memory: past the limit
    /// the rows are forgotten, and the take says so (the worker then reads the ledger).
    @Test func pastItsLimitItForgetsAndSaysSo() {
        let h = HandOver(limit: 8)
        h.put((0..<6).map(delivery))
        h.put((6..<9).map(delivery))
        h.put([delivery(9)])
        #expect(h.take() == nil, "something was forgotten: read the ledger")
        h.put([delivery(10)])
        #expect(h.take()?.map(\.id) == ["dlv_10"], "a take starts it over")
        h.put([delivery(11)])
        h.forget()
        h.put([delivery(12)])
        #expect(h.take() == nil, "forgotten: read the ledger")
    }
}
