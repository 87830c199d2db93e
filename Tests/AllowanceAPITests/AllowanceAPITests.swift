import AllowanceAPI
import Foundation
import SignalRProtocol
import TestSupport
import Testing

@Suite struct HubEventDecodingTests {
    private func args(_ target: String, _ json: String) throws -> HubArguments {
        guard case .array(let values) = try JSONValue(parsing: Array(json.utf8)) else {
            throw APIError(.invalidPayload, "not an array")
        }
        return HubArguments(target: target, values: values)
    }

    @Test(arguments: [
        ("0.1", "0.1"), ("19.99", "19.99"), ("1e-2", "0.01"), ("12345678.91", "12345678.91"), ("-5.25", "-5.25"),
    ])
    func balancesAreExact(_ literal: String, _ expected: String) throws {
        let event = try HubEvent(
            target: "BalanceUpdated",
            arguments: args("BalanceUpdated", #"["11111111-1111-4111-8111-111111111111", \#(literal)]"#))
        #expect(
            event
                == .balanceUpdated(
                    childId: UUID(uuidString: "11111111-1111-4111-8111-111111111111")!,
                    balance: Decimal(string: expected)!))
    }

    @Test func decodesAFullTransactionWithFractionalAndPlainDates() throws {
        // Each form to its exact instant: the milliseconds kept, the offset applied.
        for (date, seconds) in [
            ("2026-11-22T10:00:00Z", 1_795_341_600.0), ("2026-11-22T10:00:00.123Z", 1_795_341_600.123),
            ("2026-11-22T12:00:00+02:00", 1_795_341_600.0), ("2026-11-22T11:30:00.5+01:30", 1_795_341_600.5),
        ] {
            let json =
                #"[{"id":"00000000-0000-4000-8000-000000000001","childId":"11111111-1111-4111-8111-111111111111","amount":19.99,"type":"Credit","description":"Chores","balanceAfter":45.49,"createdAt":"\#(date)","createdByName":"Pat"}]"#
            guard
                case .transactionCreated(let t) = try HubEvent(
                    target: "TransactionCreated", arguments: args("TransactionCreated", json))
            else {
                Issue.record("not a full transaction")
                return
            }
            #expect(t.amount == Decimal(string: "19.99")! && t.balanceAfter == Decimal(string: "45.49")!)
            #expect(t.type == .credit)
            #expect(
                abs(t.createdAt.timeIntervalSince1970 - seconds) < 0.000_5,
                "\(date): \(t.createdAt.timeIntervalSince1970)")
        }
    }

    @Test func acceptsTheIdOnlyForm() throws {
        let e = try HubEvent(
            target: "TransactionCreated",
            arguments: args("TransactionCreated", #"["00000000-0000-4000-8000-000000000001"]"#))
        #expect(e == .transactionCreatedId(UUID(uuidString: "00000000-0000-4000-8000-000000000001")!))
    }

    @Test(arguments: [
        ("BalanceUpdated", #"[42, "not money"]"#, "BalanceUpdated: argument 0 (childId) is not a UUID string: 42."),
        (
            "BalanceUpdated", #"["11111111-1111-4111-8111-111111111111", "lots"]"#,
            "BalanceUpdated: argument 1 (newBalance) is not a number: \"lots\"."
        ),
        (
            "BalanceUpdated", #"["11111111-1111-4111-8111-111111111111"]"#,
            "BalanceUpdated: expected (childId, newBalance), got 1 argument(s)."
        ),
        ("TransactionCreated", #"[{"id":"x"}]"#, "TransactionCreated: transaction.id is not a UUID: \"x\"."),
        (
            "TransactionCreated",
            #"[{"id":"00000000-0000-4000-8000-000000000001","childId":"11111111-1111-4111-8111-111111111111","amount":1,"type":"Refund","description":"d","balanceAfter":1,"createdAt":"2026-11-22T10:00:00Z"}]"#,
            "TransactionCreated: transaction.type must be \"Credit\" or \"Debit\", got \"Refund\"."
        ),
    ])
    func wrongPayloadsSayWhatIsWrong(_ target: String, _ json: String, _ expected: String) throws {
        #expect(throws: APIError(.invalidPayload, expected)) {
            try HubEvent(target: target, arguments: self.args(target, json))
        }
    }
}
