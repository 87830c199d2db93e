import Foundation
import SignalRProtocol
import Testing

@testable import AllowanceAPI

/// The hub's events in MessagePack as an ASP.NET Core hub writes them (a map keyed by the C# property names, money as
/// the decimal's text, the date a timestamp): the one-pass reader gives exactly the tree path's event, and forms it
/// leaves go to the tree path.
@Suite struct HubEventMessagePackTests {
    /// An Invocation of `target` with `count` arguments, which `write` writes.
    func invocation(_ target: String, count: Int, _ write: (inout MessagePackWriter) -> Void) -> [UInt8] {
        var w = MessagePackWriter()
        w.writeArrayHeader(6)
        w.write(Int64(1))
        w.writeMapHeader(0)
        w.writeNil()
        w.write(target)
        w.writeArrayHeader(count)
        write(&w)
        w.writeArrayHeader(0)  // StreamIds
        return w.bytes
    }

    /// A .NET DateTime as MessagePack-CSharp writes it: the 64-bit timestamp extension.
    static func timestamp(seconds: UInt32, nanoseconds: UInt32) -> [UInt8] {
        let both = UInt64(nanoseconds) << 34 | UInt64(seconds)
        return [0xD7, 0xFF] + withUnsafeBytes(of: both.bigEndian, Array.init)
    }

    func transaction(
        _ id: UUID, amount: String, balance: String,
        keys: [String] = [
            "Id", "ChildId", "Amount", "Type", "Description", "BalanceAfter", "CreatedAt", "CreatedByName",
        ]
    ) -> [UInt8] {
        // The writer has no timestamp of its own (clients never send one): the extension's bytes go in by hand.
        let marker = "\u{1}timestamp"
        var bytes = invocation("TransactionCreated", count: 1) { w in
            w.writeMapHeader(8)
            for (key, value) in zip(
                keys,
                [
                    id.uuidString, "6f9619ff-8b86-d011-b42d-00c04fc964ff", amount, "Credit", "Allowance", balance,
                    marker, "Mum",
                ])
            {
                w.write(key)
                w.write(value)
            }
        }
        var placeholder = MessagePackWriter()
        placeholder.write(marker)
        let at = bytes.firstRange(of: placeholder.bytes)!
        bytes.replaceSubrange(at, with: Self.timestamp(seconds: 1_795_545_000, nanoseconds: 125_000_000))
        return bytes
    }

    func onePass(_ bytes: [UInt8]) -> HubEvent? {
        bytes.withUnsafeBytes { raw in
            MessagePackHubProtocol.decodeInvocation(raw) { target, reader in
                HubEvent.read(target: String(decoding: target, as: UTF8.self), &reader)
            }
        }
    }

    func treePath(_ bytes: [UInt8]) -> HubEvent? {
        guard case .invocation(let inv)? = try? MessagePackHubProtocol.decode(bytes) else { return nil }
        return try? HubEvent(target: inv.target, arguments: HubArguments(target: inv.target, values: inv.arguments))
    }

    @Test func theAspNetShapeIsReadInOnePassAsTheTreeReadsIt() throws {
        let id = UUID()
        let bytes = transaction(id, amount: "12.50", balance: "40.05")
        let fast = try #require(onePass(bytes))
        #expect(fast == treePath(bytes))
        guard case .transactionCreated(let t) = fast else {
            Issue.record("not a transaction: \(fast)")
            return
        }
        #expect(t.id == id && t.amount == Decimal(string: "12.50") && t.balanceAfter == Decimal(string: "40.05"))
        #expect(ISODate.string(t.createdAt) == "2026-11-24T18:30:00.125Z")
        #expect(t.createdByName == "Mum")
    }

    @Test func camelCaseKeysAndNumbersAreReadToo() throws {
        let bytes = transaction(
            UUID(), amount: "3", balance: "4",
            keys: ["id", "childId", "amount", "type", "description", "balanceAfter", "createdAt", "createdByName"])
        let fast = try #require(onePass(bytes))
        #expect(fast == treePath(bytes))
    }

    @Test func keysAreMatchedInAnyASCIICaseAndNearMissesAreNotTaken() throws {
        let shouted = transaction(
            UUID(), amount: "3.10", balance: "4",
            keys: ["ID", "CHILDID", "AMOUNT", "TYPE", "DESCRIPTION", "BALANCEAFTER", "CREATEDAT", "CREATEDBYNAME"])
        let fast = try #require(onePass(shouted))
        #expect(fast == treePath(shouted))
        // "Amoun" is one letter short: no amount, so neither path makes a transaction.
        let nearMiss = transaction(
            UUID(), amount: "3.10", balance: "4",
            keys: ["Id", "ChildId", "Amoun", "Type", "Description", "BalanceAfter", "CreatedAt", "CreatedByName"])
        #expect(onePass(nearMiss) == nil)
        #expect(treePath(nearMiss) == nil)
    }

    /// A key that is not UTF-8 makes the map unreadable for the tree path; the one pass leaves it to the tree too,
    /// though the key is one it does not read.
    @Test func aKeyThatIsNotUTF8IsLeftToTheTree() throws {
        let placeholder = "\u{2}key"
        var bytes = transaction(
            UUID(), amount: "3", balance: "4",
            keys: ["Id", "ChildId", "Amount", "Type", "Description", "BalanceAfter", "CreatedAt", placeholder])
        var w = MessagePackWriter()
        w.write(placeholder)
        let at = try #require(bytes.firstRange(of: w.bytes))
        bytes.replaceSubrange(at, with: [0xA3, 0xFF, 0xFE, 0x41])  // a three-byte string, not UTF-8
        #expect(treePath(bytes) == nil)
        #expect(onePass(bytes) == nil)
    }

    @Test func balanceUpdatedAsTextOrAsANumber() throws {
        let text = invocation("BalanceUpdated", count: 2) { w in
            w.write("6f9619ff-8b86-d011-b42d-00c04fc964ff")
            w.write("19.99")
        }
        let number = invocation("BalanceUpdated", count: 2) { w in
            w.write("6f9619ff-8b86-d011-b42d-00c04fc964ff")
            w.write(Int64(20))
        }
        let fromText = try #require(onePass(text))
        #expect(fromText == treePath(text))
        #expect(
            fromText
                == .balanceUpdated(
                    childId: UUID(uuidString: "6f9619ff-8b86-d011-b42d-00c04fc964ff")!,
                    balance: Decimal(string: "19.99")!))
        let fromNumber = try #require(onePass(number))
        #expect(fromNumber == treePath(number))
    }

    /// A float for money is left to the tree path (which reads the number it holds); three decimals too.
    @Test func formsTheReaderLeavesGoToTheTree() {
        let float = invocation("BalanceUpdated", count: 2) { w in
            w.write("6f9619ff-8b86-d011-b42d-00c04fc964ff")
            w.write(19.5)
        }
        #expect(onePass(float) == nil)
        #expect(
            treePath(float)
                == .balanceUpdated(
                    childId: UUID(uuidString: "6f9619ff-8b86-d011-b42d-00c04fc964ff")!,
                    balance: Decimal(string: "19.5")!))
        let threeDecimals = transaction(UUID(), amount: "1.005", balance: "2")
        #expect(onePass(threeDecimals) == nil)
    }
}
