import Foundation
import SignalRProtocol
import TestSupport
import Testing

/// Our MessagePack against Python's msgpack, an implementation nobody here wrote (Tests/Interop/msgpack_peer.py): what
/// it packs we read, what we write it unpacks to the same values, and hub messages it frames we decode.
@Suite(.enabled(if: PythonPeer.available, "needs .venv with msgpack: make test creates it"))
struct MessagePackInteropTests {
    static func lines(_ mode: String, input: String = "") async throws -> [(hex: String, json: JSONValue)] {
        let (status, output) = try await PythonPeer.run(script: "msgpack_peer.py", arguments: [mode], input: input)
        try #require(status == 0, "msgpack_peer.py \(mode) failed: \(output.prefix(500))")
        return try output.split(separator: "\n").map { line in
            let space = line.firstIndex(of: " ")!
            return (String(line[..<space]), try JSONValue(parsing: Array(line[line.index(after: space)...].utf8)))
        }
    }

    static func bytes(_ hex: String) -> [UInt8] {
        var out: [UInt8] = []
        var i = hex.startIndex
        while i < hex.endIndex {
            let j = hex.index(i, offsetBy: 2)
            out.append(UInt8(hex[i..<j], radix: 16)!)
            i = j
        }
        return out
    }

    /// Numbers compare by value (Python writes 1e+100 where we write 1e+100, 2.5 as 2.5, but 2**64-1 as its digits).
    static func same(_ a: JSONValue, _ b: JSONValue) -> Bool {
        switch (a, b) {
        case (.number(let x), .number(let y)): x == y || (Double(x) != nil && Double(x) == Double(y))
        case (.array(let x), .array(let y)): x.count == y.count && zip(x, y).allSatisfy(same)
        case (.object(let x), .object(let y)):
            x.count == y.count && x.allSatisfy { m in y.contains { $0.key == m.key && same($0.value, m.value) } }
        default: a == b
        }
    }

    @Test func readsWhatPythonPacks() async throws {
        let cases = try await Self.lines("pack")
        #expect(cases.count > 40)
        for (hex, expected) in cases {
            let got = Self.bytes(hex).withUnsafeBytes { raw -> JSONValue? in
                var r = MessagePackReader(raw)
                guard let v = r.readValue(), r.isAtEnd else { return nil }
                return v
            }
            #expect(
                got.map { Self.same($0, expected) } == true,
                "\(hex.prefix(60)): got \(got.map(\.serialized)?.prefix(80) ?? "nil"), want \(expected.serialized.prefix(80))"
            )
        }
    }

    @Test func pythonUnpacksWhatWeWrite() async throws {
        let values: [JSONValue] = [
            .number("0"), .number("-1"), .number("-33"), .number("300"), .number("70000"), .number("5000000000"),
            .number("-5000000000"),
            .number("18446744073709551615"), .number("2.5"), .bool(true), .null, .string(""),
            .string(String(repeating: "é", count: 200)),
            .string(String(repeating: "z", count: 70_000)), .array((0..<20).map { .number(String($0)) }),
            .object((0..<20).map { ("k\($0)", .number(String($0))) }),
            .object([("nested", .array([.object([("a", .null)])]))]),
        ]
        var hex = ""
        for v in values {
            var w = MessagePackWriter()
            w.write(v)
            hex += w.bytes.map { String(format: "%02x", $0) }.joined() + "\n"
        }
        let (status, output) = try await PythonPeer.run(script: "msgpack_peer.py", arguments: ["unpack"], input: hex)
        try #require(status == 0, "\(output.prefix(500))")
        let seen = try output.split(separator: "\n").map { try JSONValue(parsing: Array($0.utf8)) }
        #expect(seen.count == values.count)
        for (got, want) in zip(seen, values) {
            #expect(
                Self.same(got, want), "python read \(got.serialized.prefix(80)), we wrote \(want.serialized.prefix(80))"
            )
        }
    }

    @Test func decodesHubMessagesPythonFrames() async throws {
        let cases = try await Self.lines("hub")
        #expect(cases.count == 12)
        for (hex, meaning) in cases {
            let (pieces, incomplete) = try BinaryMessageFormat.split(Self.bytes(hex))
            #expect(pieces.count == 1 && !incomplete)
            let message = try #require(try MessagePackHubProtocol.decode(pieces[0]))
            // The same message as the JSON protocol reads it from the meaning Python gave.
            let expected = try #require(try JSONHubProtocol.decode(Array(meaning.serialized.utf8)))
            #expect(message == expected, "\(hex)")
        }
    }
}
