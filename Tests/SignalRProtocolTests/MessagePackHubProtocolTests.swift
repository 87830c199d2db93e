import Foundation
import SignalRProtocol
import Testing

/// The MessagePack hub protocol against the .NET implementation's own vectors (MessagePackHubProtocolTestBase.cs in
/// dotnet/aspnetcore): each message's bytes as MessagePack-CSharp writes them, parsed and written back, and the error
/// texts of its invalid payloads.
@Suite struct MessagePackHubProtocolTests {
    static let headers = [
        "Foo": "Bar", "KeyWith\nNew\r\nLines": "Still Works", "ValueWithNewLines": "Also\nWorks\r\nFine",
    ]

    /// (name, message, base64 of the unframed MessagePack array)
    static let vectors: [(String, HubMessage, String)] = [
        (
            "InvocationWithNoHeadersAndNoArgs",
            .invocation(.init(invocationId: "xyz", target: "method", arguments: [])), "lgGAo3h5eqZtZXRob2SQkA=="
        ),
        (
            "InvocationWithNoHeadersNoIdAndNoArgs", .invocation(.init(target: "method", arguments: [])),
            "lgGAwKZtZXRob2SQkA=="
        ),
        (
            "InvocationWithNoHeadersNoIdAndSingleIntArg",
            .invocation(.init(target: "method", arguments: [.number("42")])), "lgGAwKZtZXRob2SRKpA="
        ),
        (
            "InvocationWithNoHeadersNoIdIntAndStringArgs",
            .invocation(.init(target: "method", arguments: [.number("42"), .string("string")])),
            "lgGAwKZtZXRob2SSKqZzdHJpbmeQ"
        ),
        (
            "InvocationWithStreamArgument",
            .invocation(.init(target: "Target", arguments: [], streamIds: ["__test_id__"])),
            "lgGAwKZUYXJnZXSQkatfX3Rlc3RfaWRfXw=="
        ),
        (
            "InvocationWithMultipleStreams",
            .invocation(.init(target: "Target", arguments: [], streamIds: ["__test_id__", "__test_id2__"])),
            "lgGAwKZUYXJnZXSQkqtfX3Rlc3RfaWRfX6xfX3Rlc3RfaWQyX18="
        ),
        (
            "StreamItemWithNoHeadersAndIntItem", .streamItem(.init(invocationId: "xyz", item: .number("42"))),
            "lAKAo3h5eio="
        ),
        (
            "StreamItemWithNoHeadersAndStringItem", .streamItem(.init(invocationId: "xyz", item: .string("string"))),
            "lAKAo3h5eqZzdHJpbmc="
        ),
        (
            "StreamItemWithNoHeadersAndBoolItem", .streamItem(.init(invocationId: "xyz", item: .bool(true))),
            "lAKAo3h5esM="
        ),
        (
            "CompletionWithNoHeadersAndError",
            .completion(.init(invocationId: "xyz", outcome: .error("Error not found!"))),
            "lQOAo3h5egGwRXJyb3Igbm90IGZvdW5kIQ=="
        ),
        (
            "CompletionWithHeadersAndError",
            .completion(.init(invocationId: "xyz", outcome: .error("Error not found!"), headers: headers)),
            "lQODo0Zvb6NCYXKyS2V5V2l0aApOZXcNCkxpbmVzq1N0aWxsIFdvcmtzsVZhbHVlV2l0aE5ld0xpbmVzsEFsc28KV29ya3MNCkZpbmWjeHl6AbBFcnJvciBub3QgZm91bmQh"
        ),
        ("CompletionWithNoHeadersAndNoResult", .completion(.init(invocationId: "xyz", outcome: .void)), "lAOAo3h5egI="),
        (
            "CompletionWithHeadersAndNoResult",
            .completion(.init(invocationId: "xyz", outcome: .void, headers: headers)),
            "lAODo0Zvb6NCYXKyS2V5V2l0aApOZXcNCkxpbmVzq1N0aWxsIFdvcmtzsVZhbHVlV2l0aE5ld0xpbmVzsEFsc28KV29ya3MNCkZpbmWjeHl6Ag=="
        ),
        (
            "CompletionWithNoHeadersAndIntResult",
            .completion(.init(invocationId: "xyz", outcome: .result(.number("42")))), "lQOAo3h5egMq"
        ),
        (
            "CompletionWithNoHeadersAndStringResult",
            .completion(.init(invocationId: "xyz", outcome: .result(.string("string")))), "lQOAo3h5egOmc3RyaW5n"
        ),
        (
            "CompletionWithNoHeadersAndBooleanResult",
            .completion(.init(invocationId: "xyz", outcome: .result(.bool(true)))), "lQOAo3h5egPD"
        ),
        (
            "StreamInvocationWithNoHeadersAndNoArgs",
            .streamInvocation(.init(invocationId: "xyz", target: "method", arguments: [])), "lgSAo3h5eqZtZXRob2SQkA=="
        ),
        (
            "StreamInvocationWithStreamAndNormalArgument",
            .streamInvocation(
                .init(invocationId: "xyz", target: "method", arguments: [.number("42")], streamIds: ["__test_id__"])),
            "lgSAo3h5eqZtZXRob2SRKpGrX190ZXN0X2lkX18="
        ),
        ("CancelInvocationWithNoHeaders", .cancelInvocation(invocationId: "xyz"), "kwWAo3h5eg=="),
        (
            "CancelInvocationWithHeaders", .cancelInvocation(invocationId: "xyz", headers: headers),
            "kwWDo0Zvb6NCYXKyS2V5V2l0aApOZXcNCkxpbmVzq1N0aWxsIFdvcmtzsVZhbHVlV2l0aE5ld0xpbmVzsEFsc28KV29ya3MNCkZpbmWjeHl6"
        ),
        ("Ping", .ping, "kQY="),
        ("CloseMessage", .close(.init()), "kwfAwg=="),
        ("CloseMessage_HasError", .close(.init(error: "Error!")), "kwemRXJyb3Ihwg=="),
        ("CloseMessage_HasAllowReconnect", .close(.init(allowReconnect: true)), "kwfAww=="),
        (
            "CloseMessage_HasErrorAndAllowReconnect", .close(.init(error: "Error!", allowReconnect: true)),
            "kwemRXJyb3Ihww=="
        ),
    ]

    @Test(arguments: vectors.indices) func parsesTheDotNetBytes(_ i: Int) throws {
        let (name, message, base64) = Self.vectors[i]
        let bytes = Array(Data(base64Encoded: base64)!)
        #expect(try MessagePackHubProtocol.decode(bytes) == message, "\(name)")
    }

    @Test(arguments: vectors.indices) func writesTheDotNetBytes(_ i: Int) throws {
        let (name, message, base64) = Self.vectors[i]
        let framed = MessagePackHubProtocol.encode(message)
        let (pieces, incomplete) = try BinaryMessageFormat.split(framed)
        #expect(!incomplete && pieces.count == 1)
        #expect(Data(pieces[0]).base64EncodedString() == base64, "\(name)")
    }

    /// A float item as MessagePack-CSharp writes a C# float (float32), read as the number it is.
    @Test func readsFloat32Items() throws {
        let item = try MessagePackHubProtocol.decode(Array(Data(base64Encoded: "lAKAo3h5espCKAAA")!))
        #expect(item == .streamItem(.init(invocationId: "xyz", item: .number("42.0"))))
    }

    @Test func ignoresExtraTrailingFields() throws {
        let bytes: [UInt8] =
            [0x98, 1, 0x80, 0xA3] + Array("xyz".utf8) + [0xA6] + Array("method".utf8) + [0x90, 0x90, 0xC3, 0xA2]
            + Array("ex".utf8)
        #expect(
            try MessagePackHubProtocol.decode(bytes)
                == .invocation(.init(invocationId: "xyz", target: "method", arguments: [])))
    }

    @Test func ignoresUnknownMessageTypes() throws {
        #expect(try MessagePackHubProtocol.decode([0x92, 99, 0x80]) == nil)
    }

    static let invalid: [(String, [UInt8], String)] = [
        ("MessageTypeString", [0x91, 0xA3, 0x66, 0x6F, 0x6F], "Reading 'messageType' as Int32 failed."),
        ("HeadersNotAMap", [0x92, 1, 0xA3, 0x66, 0x6F, 0x6F], "Reading map length for 'headers' failed."),
        ("HeaderKeyInt", [0x92, 1, 0x82, 0x2A, 0xA3, 0x66, 0x6F, 0x6F], "Reading 'headers[0].Key' as String failed."),
        (
            "HeaderValueInt", [0x92, 1, 0x82, 0xA3, 0x66, 0x6F, 0x6F, 42],
            "Reading 'headers[0].Value' as String failed."
        ),
        (
            "HeaderKeyArray",
            [0x92, 1, 0x84, 0xA3, 0x66, 0x6F, 0x6F, 0xA3, 0x66, 0x6F, 0x6F, 0x90, 0xA3, 0x66, 0x6F, 0x6F],
            "Reading 'headers[1].Key' as String failed."
        ),
        (
            "HeaderValueArray",
            [0x92, 1, 0x84, 0xA3, 0x66, 0x6F, 0x6F, 0xA3, 0x66, 0x6F, 0x6F, 0xA3, 0x66, 0x6F, 0x6F, 0x90],
            "Reading 'headers[1].Value' as String failed."
        ),
        ("InvocationMissingId", [0x92, 1, 0x80], "Reading 'invocationId' as String failed."),
        ("InvocationIdBoolean", [0x91, 1, 0x80, 0xC2], "Reading 'invocationId' as String failed."),
        ("InvocationTargetMissing", [0x93, 1, 0x80, 0xA3, 0x61, 0x62, 0x63], "Reading 'target' as String failed."),
        ("InvocationTargetInt", [0x94, 1, 0x80, 0xA3, 0x61, 0x62, 0x63, 42], "Reading 'target' as String failed."),
        ("StreamInvocationMissingId", [0x92, 4, 0x80], "Reading 'invocationId' as String failed."),
        ("StreamInvocationIdBoolean", [0x93, 4, 0x80, 0xC2], "Reading 'invocationId' as String failed."),
        ("StreamItemMissingId", [0x92, 2, 0x80], "Reading 'invocationId' as String failed."),
        ("StreamItemInvocationIdBoolean", [0x93, 2, 0x80, 0xC2], "Reading 'invocationId' as String failed."),
        ("CompletionMissingId", [0x92, 3, 0x80], "Reading 'invocationId' as String failed."),
        ("CompletionIdBoolean", [0x93, 3, 0x80, 0xC2], "Reading 'invocationId' as String failed."),
        (
            "CompletionResultKindString", [0x94, 3, 0x80, 0xA3, 0x78, 0x79, 0x7A, 0xA3, 0x78, 0x79, 0x7A],
            "Reading 'resultKind' as Int32 failed."
        ),
        (
            "CompletionResultKindOutOfRange", [0x94, 3, 0x80, 0xA3, 0x78, 0x79, 0x7A, 42],
            "Invalid invocation result kind."
        ),
        ("CompletionErrorMissing", [0x94, 3, 0x80, 0xA3, 0x78, 0x79, 0x7A, 0x01], "Reading 'error' as String failed."),
        ("CompletionErrorInt", [0x95, 3, 0x80, 0xA3, 0x78, 0x79, 0x7A, 0x01, 42], "Reading 'error' as String failed."),
        (
            "InvocationArgumentArrayMissing", [0x94, 1, 0x80, 0xA3, 0x61, 0x62, 0x63, 0xA3, 0x78, 0x79, 0x7A],
            "Reading array length for 'arguments' failed."
        ),
        (
            "InvocationArgumentArrayNotAnArray", [0x95, 1, 0x80, 0xA3, 0x61, 0x62, 0x63, 0xA3, 0x78, 0x79, 0x7A, 42],
            "Reading array length for 'arguments' failed."
        ),
    ]

    @Test(arguments: invalid.indices) func refusesWithTheDotNetText(_ i: Int) {
        let (name, bytes, text) = Self.invalid[i]
        #expect(throws: HubProtocolError(text)) { try MessagePackHubProtocol.decode(bytes) }
        _ = name
    }

    /// The sizes the .NET suite pins (VerifyMessageSize): the writer adds nothing.
    @Test func messageSizesMatchDotNet() {
        let sizes: [(HubMessage, Int)] = [
            (.invocation(.init(target: "Target", arguments: [.number("1")])), 15),
            (.invocation(.init(invocationId: "1", target: "Target", arguments: [.number("1")])), 16),
            (.invocation(.init(invocationId: "1", target: "Target", arguments: [.number("1")], streamIds: ["2"])), 18),
            (.close(.init()), 5), (.close(.init(error: "error")), 10),
            (.streamItem(.init(invocationId: "1", item: .null)), 7),
            (.streamItem(.init(invocationId: "1", item: .number("1"))), 7),
            (.completion(.init(invocationId: "1", outcome: .void)), 7),
            (.completion(.init(invocationId: "1", outcome: .result(.number("1")))), 8),
            (.completion(.init(invocationId: "1", outcome: .error("error"))), 13),
            (.streamInvocation(.init(invocationId: "1", target: "target", arguments: [])), 15),
            (.streamInvocation(.init(invocationId: "1", target: "target", arguments: [], streamIds: ["2"])), 17),
            (.cancelInvocation(invocationId: "1"), 6), (.ping, 3),
        ]
        for (message, size) in sizes { #expect(MessagePackHubProtocol.encode(message).count == size, "\(message)") }
    }

    // MARK: - Framing

    @Test func lengthPrefixesAreVarInts() throws {
        for (length, prefix) in [
            (0, [0x00]), (127, [0x7F]), (128, [0x80, 0x01]), (16_384, [0x80, 0x80, 0x01]), (300, [0xAC, 0x02]),
        ] as [(Int, [UInt8])] {
            let framed = BinaryMessageFormat.frame([UInt8](repeating: 7, count: length))
            #expect(Array(framed.prefix(prefix.count)) == prefix)
            let (pieces, incomplete) = try BinaryMessageFormat.split(framed)
            #expect(pieces.map(\.count) == [length] && !incomplete)
        }
    }

    @Test func severalMessagesInOneTransportMessage() throws {
        let both = MessagePackHubProtocol.encode(.ping) + MessagePackHubProtocol.encode(.close(.init(error: "bye")))
        let (pieces, incomplete) = try BinaryMessageFormat.split(both)
        #expect(!incomplete)
        #expect(try pieces.map { try MessagePackHubProtocol.decode($0) } == [.ping, .close(.init(error: "bye"))])
    }

    /// ParserDoesNotConsumePartialData: a prefix that claims more than is there is incomplete, not a message.
    @Test func aShortMessageIsIncomplete() throws {
        let (pieces, incomplete) = try BinaryMessageFormat.split([0x05, 0x01])
        #expect(pieces.isEmpty && incomplete)
        let (good, rest) = try BinaryMessageFormat.split(MessagePackHubProtocol.encode(.ping) + [0x80])
        #expect(good.count == 1 && rest)
    }

    @Test func aLengthOf2GBOrMoreIsRefused() {
        #expect(throws: HubProtocolError("Messages over 2GB in size are not supported.")) {
            try BinaryMessageFormat.split([0x80, 0x80, 0x80, 0x80, 0x08, 0x00])
        }
        #expect(throws: HubProtocolError("Messages over 2GB in size are not supported.")) {
            try BinaryMessageFormat.split([0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01])
        }
    }
}
