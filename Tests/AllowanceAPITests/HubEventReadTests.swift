import Foundation
import SignalRProtocol
import Testing

@testable import AllowanceAPI

/// The one-pass reader (`HubEvent.read` inside `JSONHubProtocol.decodeInvocation`) against the tree path
/// (`JSONHubProtocol.decode`, then `HubEvent(target:arguments:)`): whatever the reader takes, it reads exactly as the
/// tree path does; what it leaves (nil) goes to the tree path, which accepts it or gives the exact error.
@Suite struct HubEventReadTests {
    func onePass(_ text: String) -> HubEvent? {
        Array(text.utf8).withUnsafeBufferPointer { bytes in
            JSONHubProtocol.decodeInvocation(bytes) { target, reader in
                HubEvent.read(target: String(decoding: target, as: UTF8.self), &reader)
            }
        }
    }

    /// nil when the tree path refuses the message (or it is no invocation).
    func treePath(_ text: String) -> HubEvent? {
        guard case .invocation(let inv)? = try? JSONHubProtocol.decode(Array(text.utf8)) else { return nil }
        return try? HubEvent(target: inv.target, arguments: HubArguments(target: inv.target, values: inv.arguments))
    }

    func transaction(
        _ id: UUID, amount: String, balance: String, extra: String = "", description: String = "Allowance"
    ) -> String {
        #"{"id":"\#(id.lowercased)","childId":"6f9619ff-8b86-d011-b42d-00c04fc964ff","amount":\#(amount),"type":"Credit","#
            + #""description":"\#(description)","balanceAfter":\#(balance),"createdAt":"2026-11-20T08:00:00.125Z","createdByName":"Mum"\#(extra)}"#
    }

    @Test func theCommonFormIsReadInOnePassExactlyAsTheTreeReadsIt() {
        var seed: UInt64 = 42
        func next(_ n: UInt64) -> UInt64 {
            seed = seed &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return (seed >> 33) % n
        }
        for _ in 0..<2000 {
            let amount = "\(next(500)).\(String(format: "%02d", next(100)))"
            let balance = "\(next(100_000)).\(next(10))"
            let tx =
                #"{"type":1,"target":"TransactionCreated","arguments":[\#(transaction(UUID(), amount: amount, balance: balance))]}"#
            let bu =
                #"{"type":1,"target":"BalanceUpdated","arguments":["6f9619ff-8b86-d011-b42d-00c04fc964ff",\#(balance)]}"#
            for message in [tx, bu] {
                let fast = onePass(message)
                #expect(fast != nil, "the common form is read in one pass: \(message)")
                #expect(fast == treePath(message), "\(message)")
            }
        }
    }

    @Test func otherFormsGoToTheTreePathOrAreReadTheSame() {
        let id = UUID()
        let cases: [(String, fastTakesIt: Bool)] = [
            // Read in one pass: the same event as the tree's.
            (
                #"{"type":1,"target":"TransactionCreated","arguments":[\#(transaction(id, amount: "5", balance: "\"12.50\""))]}"#,
                true
            ),
            (
                #"{ "target" : "BalanceUpdated" , "type" : 1 , "arguments" : [ "6F9619FF-8B86-D011-B42D-00C04FC964FF" , "3.5" ] }"#,
                true
            ),
            (
                #"{"type":1,"target":"TransactionCreated","arguments":[\#(transaction(id, amount: "5", balance: "1", extra: #","note":{"a":[1,2,{"b":null}]}"#))]}"#,
                true
            ),
            (
                #"{"type":1,"target":"TransactionCreated","arguments":[\#(transaction(id, amount: "5", balance: "1", description: #"say \"hi\"\n\u00e9"#))]}"#,
                true
            ),
            (#"{"type":1,"target":"TransactionCreated","arguments":["\#(id.lowercased)"]}"#, true),
            (
                #"{"type":1,"target":"TransactionCreated","arguments":[\#(transaction(id, amount: "5", balance: "1"))],"x":true}"#,
                true
            ),
            // Names with escapes or beyond ASCII are decoded, then matched as the plain ones are.
            (
                #"{"type":1,"t\u0061rget":"BalanceUpdated","\u0061rguments":["6f9619ff-8b86-d011-b42d-00c04fc964ff",1]}"#,
                true
            ),
            (
                #"{"type":1,"target":"TransactionCreated","arguments":[\#(transaction(id, amount: "5", balance: "1", extra: #","\u00fcber":1,"ünter":2"#))]}"#,
                true
            ),
            // Left to the tree: another spelling, arguments before the target, more decimals, an exponent, extra
            // arguments, null or missing fields, an invocation id.
            (
                #"{"type":1,"target":"TRANSACTIONCREATED","arguments":[\#(transaction(id, amount: "5", balance: "1"))]}"#,
                false
            ),
            (
                #"{"type":1,"arguments":[\#(transaction(id, amount: "5", balance: "1"))],"target":"TransactionCreated"}"#,
                false
            ),
            (
                #"{"type":1,"target":"TransactionCreated","arguments":[\#(transaction(id, amount: "1.255", balance: "1"))]}"#,
                false
            ),
            (
                #"{"type":1,"target":"TransactionCreated","arguments":[\#(transaction(id, amount: "1e1", balance: "1"))]}"#,
                false
            ),
            (#"{"type":1,"target":"BalanceUpdated","arguments":["6f9619ff-8b86-d011-b42d-00c04fc964ff",1,2]}"#, false),
            (
                #"{"type":1,"target":"TransactionCreated","arguments":[\#(transaction(id, amount: "5", balance: "null"))]}"#,
                false
            ),
            (
                #"{"type":1,"invocationId":"7","target":"BalanceUpdated","arguments":["6f9619ff-8b86-d011-b42d-00c04fc964ff",1]}"#,
                false
            ),
            // Refused by both: broken JSON, a trailing comma, a wrong type, a bad id.
            (#"{"type":1,"target":"BalanceUpdated","arguments":["6f9619ff-8b86-d011-b42d-00c04fc964ff",1]"#, false),
            (#"{"type":1,"target":"BalanceUpdated","arguments":["6f9619ff-8b86-d011-b42d-00c04fc964ff",1,]}"#, false),
            (#"{"type":1,"target":"BalanceUpdated","arguments":["6f9619ff-8b86-d011-b42d-00c04fc964ff",1]},"#, false),
            (#"{"type":1,"target":"BalanceUpdated","arguments":["6f9619ff-8b86-d011-b42d-00c04fc964ff",1],}"#, false),
            (#"{"type":"1","target":"BalanceUpdated","arguments":["6f9619ff-8b86-d011-b42d-00c04fc964ff",1]}"#, false),
            (#"{"type":1,"target":"BalanceUpdated","arguments":["not-a-uuid",1]}"#, false),
            (#"{"type":3,"target":"BalanceUpdated","arguments":["6f9619ff-8b86-d011-b42d-00c04fc964ff",1]}"#, false),
        ]
        for (message, fastTakesIt) in cases {
            let fast = onePass(message)
            #expect((fast != nil) == fastTakesIt, "\(message)")
            if let fast { #expect(fast == treePath(message), "\(message)") }
        }
    }
}
