import Foundation
import Testing

@testable import HubSimulator

// The simulator's own codec against the spec's texts and the .NET implementation's vectors (JsonHubProtocolTestsBase.cs
// and MessagePackHubProtocolTestBase.cs in dotnet/aspnetcore), written here as literals: neither the client's codec
// nor anything else of the client's is the oracle.

private let headers = [
    "Foo": "Bar", "KeyWith\nNew\r\nLines": "Still Works", "ValueWithNewLines": "Also\nWorks\r\nFine",
]
private let serializedHeaders =
    #""headers":{"Foo":"Bar","KeyWith\nNew\r\nLines":"Still Works","ValueWithNewLines":"Also\nWorks\r\nFine"}"#

private func inv(
    _ id: String?, _ target: String, _ args: [SimValue], streams: [String] = [], headers: [String: String] = [:]
) -> SimMessage {
    .invocation(.init(id: id, target: target, arguments: args, headers: headers, streamIds: streams))
}

/// What a client sends, as JSON text (fields in the order the .NET writer puts them, or any other), and what it means.
private let clientJSON: [(String, String, SimMessage)] = [
    (
        "InvocationMessage_HasInvocationId",
        #"{"type":1,"invocationId":"123","target":"Target","arguments":[1,"Foo"]}"#, inv("123", "Target", [1, "Foo"])
    ),
    (
        "InvocationMessage_HasBoolArgument", #"{"type":1,"target":"Target","arguments":[true]}"#,
        inv(nil, "Target", [true])
    ),
    (
        "InvocationMessage_HasNullArgument", #"{"type":1,"target":"Target","arguments":[null]}"#,
        inv(nil, "Target", [.null])
    ),
    (
        "InvocationMessage_HasStreamAndNormalArgument",
        #"{"type":1,"target":"Target","arguments":[42],"streamIds":["__test_id__"]}"#,
        inv(nil, "Target", [42], streams: ["__test_id__"])
    ),
    (
        "InvocationMessage_HasHeaders", "{\"type\":1," + serializedHeaders + ",\"target\":\"Target\",\"arguments\":[]}",
        inv(nil, "Target", [], headers: headers)
    ),
    (
        "InvocationMessage_IntegerArrayArgumentFirst", #"{ "arguments": [1,2], "type":1, "target": "Method" }"#,
        inv(nil, "Method", [1, 2])
    ),
    (
        "InvocationMessage_ExactMoney",
        #"{"type":1,"target":"AddTransaction","arguments":[0.1,12.345678901234567890]}"#,
        inv(
            nil, "AddTransaction",
            [.number(Decimal(string: "0.1")!), .number(Decimal(string: "12.345678901234567890")!)])
    ),
    (
        "StreamInvocationMessage_HasStreamArgument",
        #"{"type":4,"invocationId":"123","target":"Target","arguments":[],"streamIds":["__test_id__"]}"#,
        .streamInvocation(.init(id: "123", target: "Target", arguments: [], streamIds: ["__test_id__"]))
    ),
    (
        "StreamItemMessage_HasNullItem", #"{"type":2,"invocationId":"123","item":null}"#,
        .streamItem(id: "123", item: .null)
    ),
    (
        "CompletionMessage_HasNullResult", #"{"type":3,"invocationId":"123","result":null}"#,
        .completion(id: "123", .result(.null))
    ),
    ("CompletionMessage_HasErrorAndCamelCase", #"{"type":3,"invocationId":"123"}"#, .completion(id: "123", .void)),
    (
        "CompletionMessage_HasError", #"{"type":3,"invocationId":"123","error":"Whoops!"}"#,
        .completion(id: "123", .error("Whoops!"))
    ),
    (
        "CompletionMessage_ResultFirst", #"{ "type":3, "result": 10, "invocationId": "15" }"#,
        .completion(id: "15", .result(10))
    ),
    (
        "CancelInvocationMessage_HasHeaders", "{\"type\":5," + serializedHeaders + ",\"invocationId\":\"123\"}",
        .cancelInvocation(id: "123")
    ),
    ("PingMessage", #"{"type":6}"#, .ping),
    ("CloseMessage_HasErrorEmptyString", #"{"type":7,"error":""}"#, .close(error: "", allowReconnect: false)),
    (
        "CloseMessage_HasErrorAndAllowReconnect", #"{"type":7,"error":"Error!","allowReconnect":true}"#,
        .close(error: "Error!", allowReconnect: true)
    ),
    ("AckMessage", #"{"type":8,"sequenceId":1394}"#, .ack(1394)),
    ("SequenceMessage", #"{"type":9,"sequenceId":1394}"#, .sequence(1394)),
]

/// MessagePack-CSharp's bytes for a client's messages (unframed arrays, base64) and what they mean.
private let clientMessagePack: [(String, String, SimMessage)] = [
    ("InvocationWithNoHeadersAndNoArgs", "lgGAo3h5eqZtZXRob2SQkA==", inv("xyz", "method", [])),
    (
        "InvocationWithNoHeadersNoIdIntAndStringArgs", "lgGAwKZtZXRob2SSKqZzdHJpbmeQ",
        inv(nil, "method", [42, "string"])
    ),
    (
        "StreamInvocationWithStreamAndNormalArgument", "lgSAo3h5eqZtZXRob2SRKpGrX190ZXN0X2lkX18=",
        .streamInvocation(.init(id: "xyz", target: "method", arguments: [42], streamIds: ["__test_id__"]))
    ),
    (
        "CompletionWithHeadersAndError (headers of a completion are not kept)",
        "lQODo0Zvb6NCYXKyS2V5V2l0aApOZXcNCkxpbmVzq1N0aWxsIFdvcmtzsVZhbHVlV2l0aE5ld0xpbmVzsEFsc28KV29ya3MNCkZpbmWjeHl6AbBFcnJvciBub3QgZm91bmQh",
        .completion(id: "xyz", .error("Error not found!"))
    ),
    ("CompletionWithNoHeadersAndNoResult", "lAOAo3h5egI=", .completion(id: "xyz", .void)),
    ("CompletionWithNoHeadersAndBooleanResult", "lQOAo3h5egPD", .completion(id: "xyz", .result(true))),
    ("CancelInvocationWithNoHeaders", "kwWAo3h5eg==", .cancelInvocation(id: "xyz")),
    ("Ping", "kQY=", .ping),
    ("CloseMessage_HasErrorAndAllowReconnect", "kwemRXJyb3Ihww==", .close(error: "Error!", allowReconnect: true)),
]

/// What the server writes, in MessagePack-CSharp's bytes (the messages whose shape the .NET server writes the same).
private let serverMessagePack: [(String, SimMessage, String)] = [
    ("StreamItemWithNoHeadersAndIntItem", .streamItem(id: "xyz", item: 42), "lAKAo3h5eio="),
    ("StreamItemWithNoHeadersAndStringItem", .streamItem(id: "xyz", item: "string"), "lAKAo3h5eqZzdHJpbmc="),
    (
        "CompletionWithNoHeadersAndError", .completion(id: "xyz", .error("Error not found!")),
        "lQOAo3h5egGwRXJyb3Igbm90IGZvdW5kIQ=="
    ),
    ("CompletionWithNoHeadersAndNoResult", .completion(id: "xyz", .void), "lAOAo3h5egI="),
    ("CompletionWithNoHeadersAndIntResult", .completion(id: "xyz", .result(42)), "lQOAo3h5egMq"),
    ("InvocationWithNoHeadersNoIdAndNoArgs", inv(nil, "method", []), "lgGAwKZtZXRob2SQkA=="),
    ("Ping", .ping, "kQY="),
    ("CloseMessage", .close(error: nil, allowReconnect: false), "kwfAwg=="),
    ("CloseMessage_HasErrorAndAllowReconnect", .close(error: "Error!", allowReconnect: true), "kwemRXJyb3Ihww=="),
]

@Suite struct SimCodecTests {
    @Test func readsWhatClientsWriteInJSON() throws {
        for (name, json, expected) in clientJSON {
            let messages = try SimJSONHubProtocol.decode(Array(json.utf8) + [0x1E])
            #expect(messages == [expected], "\(name)")
        }
    }

    @Test func writesMessagesTheSpecsWayAndReadsThemBack() throws {
        // In ASP.NET Core's order (type first, then its fields as JsonHubProtocol writes them).
        #expect(String(decoding: SimJSONHubProtocol.encode(.ping), as: UTF8.self) == "{\"type\":6}\u{1e}")
        #expect(
            String(decoding: SimJSONHubProtocol.encode(.completion(id: "1", .result(.null))), as: UTF8.self)
                == "{\"type\":3,\"invocationId\":\"1\",\"result\":null}\u{1e}")
        #expect(
            String(decoding: SimJSONHubProtocol.encode(.close(error: "Bye", allowReconnect: true)), as: UTF8.self)
                == "{\"type\":7,\"error\":\"Bye\",\"allowReconnect\":true}\u{1e}")
        #expect(
            String(
                decoding: SimJSONHubProtocol.encode(
                    .event("BalanceUpdated", ["c", .number(Decimal(string: "10.05")!)])), as: UTF8.self)
                == "{\"type\":1,\"target\":\"BalanceUpdated\",\"arguments\":[\"c\",10.05]}\u{1e}")
        // Strings escaped as RFC 8259 says.
        #expect(String(decoding: SimValue.string("a\"b\\c\nd\u{01}é").bytes, as: UTF8.self) == #""a\"b\\c\nd\u0001é""#)
        for (name, _, message) in clientJSON {
            #expect(try SimJSONHubProtocol.decode(SimJSONHubProtocol.encode(message)) == [message], "\(name)")
        }
    }

    @Test func refusesWhatTheSpecRefuses() throws {
        let bad = [
            #"{"type":3,"invocationId":"42","error":"foo","result":true}"#,  // result and error together
            #"{"type":1,"headers":{"Foo":42},"target":"T","arguments":[]}"#,  // a header that is not a string
            #"{"type":1,"target":"T"}"#,  // no arguments
            #"{"type":"one"}"#, "null", "[42]", "{}",
        ]
        for text in bad {
            #expect(throws: SimJSON.Malformed.self, "\(text)") {
                try SimJSONHubProtocol.decode(Array(text.utf8) + [0x1E])
            }
        }
        // A piece without its separator is incomplete; an unknown type is skipped, not an error.
        #expect(throws: SimJSON.Malformed.self) { try SimJSONHubProtocol.decode(Array(#"{"type":6}"#.utf8)) }
        #expect(
            try SimJSONHubProtocol.decode(Array(#"{"type":99}"#.utf8) + [0x1E] + Array(#"{"type":6}"#.utf8) + [0x1E])
                == [nil, .ping])
    }

    @Test func readsWhatClientsWriteInMessagePack() throws {
        for (name, base64, expected) in clientMessagePack {
            let body = Array(Data(base64Encoded: base64)!)
            #expect(body.count < 0x80, "one length byte frames it")
            #expect(try SimMessagePackProtocol.decode([UInt8(body.count)] + body) == [expected], "\(name)")
        }
    }

    @Test func writesMessagePackAsTheDotNetServerDoes() throws {
        for (name, message, base64) in serverMessagePack {
            let framed = SimMessagePackProtocol.encode(message)
            #expect(Int(framed[0]) == framed.count - 1, "\(name): the VarInt length")
            #expect(Data(framed.dropFirst()).base64EncodedString() == base64, "\(name)")
        }
    }

    @Test func theHandshakeIsReadWithWhatFollowsIt() throws {
        let bytes = Array(#"{"protocol":"messagepack","version":1}"#.utf8) + [0x1E, 0x02, 0x91, 0x06]
        let (request, rest) = try #require(try SimHandshake.request(bytes))
        #expect(request == .init(protocolName: "messagepack", version: 1))
        #expect(Array(rest) == [0x02, 0x91, 0x06])
        #expect(try SimHandshake.request(Array(#"{"protocol":"json""#.utf8)) == nil, "not yet whole")
        #expect(throws: SimJSON.Malformed.self) { try SimHandshake.request(Array(#"{"version":1}"#.utf8) + [0x1E]) }
        #expect(String(decoding: SimHandshake.response(), as: UTF8.self) == "{}\u{1e}")
        #expect(String(decoding: SimHandshake.response(error: "No."), as: UTF8.self) == "{\"error\":\"No.\"}\u{1e}")
    }

    @Test func negotiateAnswersAsTransportProtocolsSays() throws {
        let answer = SimNegotiation(
            connectionId: "id", connectionToken: "secret", negotiateVersion: 1,
            transports: [("WebSockets", ["Text", "Binary"]), ("ServerSentEvents", ["Text"])], statefulReconnect: true)
        let parsed = try JSONSerialization.jsonObject(with: Data(answer.json)) as? [String: Any]
        #expect(parsed?["connectionId"] as? String == "id" && parsed?["connectionToken"] as? String == "secret")
        #expect(
            (parsed?["negotiateVersion"] as? NSNumber)?.intValue == 1
                && parsed?["useStatefulReconnect"] as? Bool == true)
        let transports = parsed?["availableTransports"] as? [[String: Any]]
        #expect(transports?.map { $0["transport"] as? String } == ["WebSockets", "ServerSentEvents"])
        #expect(transports?.last?["transferFormats"] as? [String] == ["Text"])
        let v0 = SimNegotiation(
            connectionId: "id", connectionToken: nil, negotiateVersion: 0, transports: [], statefulReconnect: false)
        let old = try JSONSerialization.jsonObject(with: Data(v0.json)) as? [String: Any]
        #expect(old?["connectionToken"] == nil && old?["useStatefulReconnect"] == nil)
    }

    @Test func valuesKeepMoneyExactAndTellNumbersFromBooleans() throws {
        let v = try SimJSON.parse(Array(#"{"a":0.1,"b":true,"c":1,"d":"1","e":[null],"f":12.345678901234567890}"#.utf8))
        #expect(v["a"] == .number(Decimal(string: "0.1")!))
        #expect(v["b"] == .bool(true) && v["c"] == .number(1) && v["d"] == .string("1") && v["e"] == .array([.null]))
        #expect(v["f"]?.decimalValue == Decimal(string: "12.345678901234567890"))
        #expect(v["c"]?.intValue == 1 && v["a"]?.intValue == nil)
    }
}
