import SignalRProtocol
import Testing

// Ported from dotnet/aspnetcore src/SignalR/common/SignalR.Common/test/Internal/Protocol/JsonHubProtocolTestsBase.cs
// (the vectors whose arguments are plain JSON; those built on a .NET CustomObject test .NET's serializer, not the protocol).

private let rs = "\u{1e}"
private let testHeaders = [
    "Foo": "Bar", "KeyWith\nNew\r\nLines": "Still Works", "ValueWithNewLines": "Also\nWorks\r\nFine",
]
private let serializedHeaders =
    "\"headers\":{\"Foo\":\"Bar\",\"KeyWith\\nNew\\r\\nLines\":\"Still Works\",\"ValueWithNewLines\":\"Also\\nWorks\\r\\nFine\"}"

struct ProtocolVector: Sendable, CustomTestStringConvertible {
    let name: String
    let message: HubMessage
    let json: String
    var testDescription: String { name }
}

private func inv(_ id: String?, _ target: String, _ args: [JSONValue], streams: [String] = []) -> HubMessage {
    .invocation(.init(invocationId: id, target: target, arguments: args, streamIds: streams))
}

private func sinv(_ id: String, _ target: String, _ args: [JSONValue], streams: [String] = []) -> HubMessage {
    .streamInvocation(.init(invocationId: id, target: target, arguments: args, streamIds: streams))
}

private func result(_ id: String, _ value: JSONValue, headers: [String: String] = [:]) -> HubMessage {
    .completion(.init(invocationId: id, outcome: .result(value), headers: headers))
}

let protocolVectors: [ProtocolVector] = [
    .init(
        name: "InvocationMessage_HasInvocationId", message: inv("123", "Target", [1, "Foo"]),
        json: #"{"type":1,"invocationId":"123","target":"Target","arguments":[1,"Foo"]}"#),
    .init(
        name: "InvocationMessage_HasBoolArgument", message: inv(nil, "Target", [true]),
        json: #"{"type":1,"target":"Target","arguments":[true]}"#),
    .init(
        name: "InvocationMessage_HasNullArgument", message: inv(nil, "Target", [nil]),
        json: #"{"type":1,"target":"Target","arguments":[null]}"#),
    .init(
        name: "InvocationMessage_HasStreamArgument", message: inv(nil, "Target", [], streams: ["__test_id__"]),
        json: #"{"type":1,"target":"Target","arguments":[],"streamIds":["__test_id__"]}"#),
    .init(
        name: "InvocationMessage_HasStreamAndNormalArgument",
        message: inv(nil, "Target", [42], streams: ["__test_id__"]),
        json: #"{"type":1,"target":"Target","arguments":[42],"streamIds":["__test_id__"]}"#),
    .init(
        name: "InvocationMessage_HasMultipleStreams",
        message: inv(nil, "Target", [], streams: ["__test_id__", "__test_id2__"]),
        json: #"{"type":1,"target":"Target","arguments":[],"streamIds":["__test_id__","__test_id2__"]}"#),
    .init(
        name: "InvocationMessage_DateTimeOffsetArgument", message: inv(nil, "Method", ["2016-05-10T13:51:20+12:34"]),
        json: #"{"type":1,"target":"Method","arguments":["2016-05-10T13:51:20+12:34"]}"#),
    .init(
        name: "StreamItemMessage_HasIntegerItem", message: .streamItem(.init(invocationId: "123", item: 1)),
        json: #"{"type":2,"invocationId":"123","item":1}"#),
    .init(
        name: "StreamItemMessage_HasStringItem", message: .streamItem(.init(invocationId: "123", item: "Foo")),
        json: #"{"type":2,"invocationId":"123","item":"Foo"}"#),
    .init(
        name: "StreamItemMessage_HasBoolItem", message: .streamItem(.init(invocationId: "123", item: true)),
        json: #"{"type":2,"invocationId":"123","item":true}"#),
    .init(
        name: "StreamItemMessage_HasNullItem", message: .streamItem(.init(invocationId: "123", item: nil)),
        json: #"{"type":2,"invocationId":"123","item":null}"#),
    .init(
        name: "CompletionMessage_HasErrorAndCamelCase",
        message: .completion(.init(invocationId: "123", outcome: .void)),
        json: #"{"type":3,"invocationId":"123"}"#),
    .init(
        name: "CompletionMessage_HasErrorAndHeadersAndCamelCase",
        message: .completion(.init(invocationId: "123", outcome: .void, headers: testHeaders)),
        json: "{\"type\":3," + serializedHeaders + ",\"invocationId\":\"123\"}"),
    .init(
        name: "CompletionMessage_HasIntegerResult", message: result("123", 1),
        json: #"{"type":3,"invocationId":"123","result":1}"#),
    .init(
        name: "CompletionMessage_HasStringResult", message: result("123", "Foo"),
        json: #"{"type":3,"invocationId":"123","result":"Foo"}"#),
    .init(
        name: "CompletionMessage_HasBoolResult", message: result("123", true),
        json: #"{"type":3,"invocationId":"123","result":true}"#),
    .init(
        name: "CompletionMessage_HasNullResult", message: result("123", nil),
        json: #"{"type":3,"invocationId":"123","result":null}"#),
    .init(
        name: "CompletionMessage_HasError",
        message: .completion(.init(invocationId: "123", outcome: .error("Whoops!"))),
        json: #"{"type":3,"invocationId":"123","error":"Whoops!"}"#),
    .init(
        name: "CompletionMessage_HasErrorAndHeaders",
        message: .completion(.init(invocationId: "123", outcome: .error("Whoops!"), headers: testHeaders)),
        json: "{\"type\":3," + serializedHeaders + ",\"invocationId\":\"123\",\"error\":\"Whoops!\"}"),
    .init(
        name: "StreamInvocationMessage_HasInvocationId", message: sinv("123", "Target", [1, "Foo"]),
        json: #"{"type":4,"invocationId":"123","target":"Target","arguments":[1,"Foo"]}"#),
    .init(
        name: "StreamInvocationMessage_HasBoolArgument", message: sinv("123", "Target", [true]),
        json: #"{"type":4,"invocationId":"123","target":"Target","arguments":[true]}"#),
    .init(
        name: "StreamInvocationMessage_HasNullArgument", message: sinv("123", "Target", [nil]),
        json: #"{"type":4,"invocationId":"123","target":"Target","arguments":[null]}"#),
    .init(
        name: "StreamInvocationMessage_HasStreamArgument", message: sinv("123", "Target", [], streams: ["__test_id__"]),
        json: #"{"type":4,"invocationId":"123","target":"Target","arguments":[],"streamIds":["__test_id__"]}"#),
    .init(
        name: "CancelInvocationMessage_HasInvocationId", message: .cancelInvocation(invocationId: "123"),
        json: #"{"type":5,"invocationId":"123"}"#),
    .init(
        name: "CancelInvocationMessage_HasHeaders",
        message: .cancelInvocation(invocationId: "123", headers: testHeaders),
        json: "{\"type\":5," + serializedHeaders + ",\"invocationId\":\"123\"}"),
    .init(name: "PingMessage", message: .ping, json: #"{"type":6}"#),
    .init(name: "CloseMessage", message: .close(.init()), json: #"{"type":7}"#),
    .init(
        name: "CloseMessage_HasError", message: .close(.init(error: "Error!")), json: #"{"type":7,"error":"Error!"}"#),
    .init(name: "CloseMessage_HasErrorEmptyString", message: .close(.init(error: "")), json: #"{"type":7,"error":""}"#),
    .init(
        name: "CloseMessage_HasAllowReconnect", message: .close(.init(allowReconnect: true)),
        json: #"{"type":7,"allowReconnect":true}"#),
    .init(
        name: "CloseMessage_HasErrorAndAllowReconnect", message: .close(.init(error: "Error!", allowReconnect: true)),
        json: #"{"type":7,"error":"Error!","allowReconnect":true}"#),
    // Stateful reconnect messages (HubProtocol.md, "Ack" and "Sequence").
    .init(name: "AckMessage", message: .ack(sequenceId: 1394), json: #"{"type":8,"sequenceId":1394}"#),
    .init(name: "SequenceMessage", message: .sequence(sequenceId: 1394), json: #"{"type":9,"sequenceId":1394}"#),
]

let outOfOrderVectors: [ProtocolVector] = [
    .init(
        name: "InvocationMessage_StringIsoDateArgumentFirst",
        message: inv(nil, "Method", ["2016-05-10T13:51:20+12:34"]),
        json: #"{ "arguments": ["2016-05-10T13:51:20+12:34"], "type":1, "target": "Method" }"#),
    .init(
        name: "InvocationMessage_IntegerArrayArgumentFirst", message: inv(nil, "Method", [1, 2]),
        json: #"{ "arguments": [1,2], "type":1, "target": "Method" }"#),
    .init(
        name: "StreamInvocationMessage_IntegerArrayArgumentFirst", message: sinv("3", "Method", [1, 2]),
        json: #"{ "type":4, "arguments": [1,2], "target": "Method", "invocationId": "3" }"#),
    .init(
        name: "CompletionMessage_ResultFirst", message: result("15", 10),
        json: #"{ "type":3, "result": 10, "invocationId": "15" }"#),
    .init(
        name: "StreamItemMessage_ItemFirst", message: .streamItem(.init(invocationId: "1a", item: "foo")),
        json: #"{ "item": "foo", "invocationId": "1a", "type":2 }"#),
]

@Suite struct JSONHubProtocolVectorTests {
    @Test(arguments: protocolVectors)
    func writeMessage(_ vector: ProtocolVector) {
        #expect(String(decoding: JSONHubProtocol.encode(vector.message), as: UTF8.self) == vector.json + rs)
    }

    @Test(arguments: protocolVectors)
    func parseMessage(_ vector: ProtocolVector) throws {
        let framed = Array((vector.json + rs).utf8)
        let pieces = try TextMessageFormat.parse(framed)
        #expect(pieces.count == 1)
        #expect(try JSONHubProtocol.decode(pieces[0]) == vector.message)
    }

    @Test(arguments: outOfOrderVectors)
    func parseOutOfOrderJson(_ vector: ProtocolVector) throws {
        #expect(try JSONHubProtocol.decode(Array(vector.json.utf8)) == vector.message)
    }

    @Test(arguments: [
        ("null", "Unexpected JSON Token Type 'Null'. Expected a JSON Object."),
        ("\"foo\"", "Unexpected JSON Token Type 'String'. Expected a JSON Object."),
        ("[42]", "Unexpected JSON Token Type 'Array'. Expected a JSON Object."),
        ("{}", "Missing required property 'type'."),
        (
            #"{"type":1,"headers":{"Foo": 42},"target":"test",arguments:[]}"#,
            "Expected header 'Foo' to be of type String."
        ),
        (
            #"{"type":1,"headers":{"Foo": true},"target":"test",arguments:[]}"#,
            "Expected header 'Foo' to be of type String."
        ),
        (
            #"{"type":1,"headers":{"Foo": null},"target":"test",arguments:[]}"#,
            "Expected header 'Foo' to be of type String."
        ),
        (
            #"{"type":1,"headers":{"Foo": []},"target":"test",arguments:[]}"#,
            "Expected header 'Foo' to be of type String."
        ),
        (#"{"type":1}"#, "Missing required property 'target'."),
        (#"{"type":1,"invocationId":42}"#, "Expected 'invocationId' to be of type String."),
        (#"{"type":1,"invocationId":"42"}"#, "Missing required property 'target'."),
        (#"{"type":1,"invocationId":"42","target":42}"#, "Expected 'target' to be of type String."),
        (#"{"type":1,"invocationId":"42","target":"foo"}"#, "Missing required property 'arguments'."),
        (#"{"type":1,"invocationId":"42","target":"foo","arguments":{}}"#, "Expected 'arguments' to be of type Array."),
        (#"{"type":2}"#, "Missing required property 'invocationId'."),
        (#"{"type":2,"invocationId":42}"#, "Expected 'invocationId' to be of type String."),
        (#"{"type":2,"invocationId":"42"}"#, "Missing required property 'item'."),
        (#"{"type":3}"#, "Missing required property 'invocationId'."),
        (#"{"type":3,"invocationId":42}"#, "Expected 'invocationId' to be of type String."),
        (#"{"type":3,"invocationId":"42","error":[]}"#, "Expected 'error' to be of type String."),
        (#"{"type":4}"#, "Missing required property 'invocationId'."),
        (#"{"type":4,"invocationId":42}"#, "Expected 'invocationId' to be of type String."),
        (#"{"type":4,"invocationId":"42","target":42}"#, "Expected 'target' to be of type String."),
        (#"{"type":4,"invocationId":"42","target":"foo"}"#, "Missing required property 'arguments'."),
        (#"{"type":4,"invocationId":"42","target":"foo","arguments":{}}"#, "Expected 'arguments' to be of type Array."),
        (
            #"{"type":3,"invocationId":"42","error":"foo","result":true}"#,
            "The 'error' and 'result' properties are mutually exclusive."
        ),
        // InvalidNestingWhileBindingTypesFails: broken JSON inside the arguments.
        (#"{"type":1,"invocationId":"42","target":"foo","arguments":[[}]}"#, "Error reading JSON."),
    ])
    func invalidMessages(_ input: String, _ expected: String) {
        #expect(throws: HubProtocolError.self) { try JSONHubProtocol.decode(Array(input.utf8)) }
        do {
            _ = try JSONHubProtocol.decode(Array(input.utf8))
        } catch {
            #expect(error.message == expected)
        }
    }

    @Test func extraItemsInMessageAreIgnored() throws {
        let m = try JSONHubProtocol.decode(
            Array(#"{"type":1,"invocationId":"42","target":"foo","arguments":[],"extraParameter":"1"}"#.utf8))
        #expect(m == inv("42", "foo", []))
    }

    @Test func unknownMessageTypesAreIgnored() throws {
        #expect(try JSONHubProtocol.decode(Array(#"{"type":99,"anything":[1,2]}"#.utf8)) == nil)
    }

    // VerifyMessageSize: the serialized size (with 0x1E) must not change unnoticed.
    @Test(
        arguments: [
            ("InvocationMessage_WithoutInvocationId", inv(nil, "Target", [1]), 45),
            ("InvocationMessage_WithInvocationId", inv("1", "Target", [1]), 64),
            ("InvocationMessage_WithInvocationIdAndStreamId", inv("1", "Target", [1], streams: ["2"]), 82),
            ("CloseMessage_Empty", .close(.init()), 11),
            ("CloseMessage_WithError", .close(.init(error: "error")), 27),
            ("StreamItemMessage_WithNullItem", .streamItem(.init(invocationId: "1", item: nil)), 42),
            ("StreamItemMessage_WithItem", .streamItem(.init(invocationId: "1", item: 1)), 39),
            ("CompletionMessage_Empty", .completion(.init(invocationId: "1", outcome: .void)), 30),
            ("CompletionMessage_WithResult", result("1", 1), 41),
            ("CompletionMessage_WithError", .completion(.init(invocationId: "1", outcome: .error("error"))), 46),
            ("StreamInvocationMessage", sinv("1", "target", []), 63),
            ("StreamInvocationMessage_WithStreamId", sinv("1", "target", [], streams: ["2"]), 81),
            ("CancelInvocationMessage", .cancelInvocation(invocationId: "1"), 30),
            ("PingMessage", .ping, 11),
        ] as [(String, HubMessage, Int)])
    func verifyMessageSize(_ name: String, _ message: HubMessage, _ size: Int) {
        #expect(JSONHubProtocol.encode(message).count == size, "\(name)")
    }
}

// Ported from dotnet/aspnetcore src/SignalR/clients/ts/signalr/tests/JsonHubProtocol.test.ts
@Suite struct TypeScriptJsonHubProtocolTests {
    @Test func readsCompletionMessages() throws {
        let cases: [(String, HubMessage.Completion.Outcome)] = [
            (#"{"type":3, "invocationId": "abc", "result": "OK", "headers": {}}"#, .result("OK")),
            (#"{"type":3, "invocationId": "abc", "result": null, "headers": {}}"#, .result(nil)),
            (
                #"{"type":3, "invocationId": "abc", "result": 1514805840000, "headers": {}}"#,
                .result(.number("1514805840000"))
            ),
            (
                #"{"type":3, "invocationId": "abc", "result": null, "headers": {}, "extraParameter":"value"}"#,
                .result(nil)
            ),
        ]
        for (payload, outcome) in cases {
            let messages = try TextMessageFormat.parse(Array((payload + rs).utf8)).map {
                try JSONHubProtocol.decode($0)
            }
            #expect(messages == [.completion(.init(invocationId: "abc", outcome: outcome))])
        }
    }

    @Test func readsStreamItemWithHeaders() throws {
        let m = try JSONHubProtocol.decode(
            Array(#"{"type":2, "invocationId": "abc", "headers": {"t": "u"}, "item": 8}"#.utf8))
        #expect(m == .streamItem(.init(invocationId: "abc", item: 8, headers: ["t": "u"])))
    }

    // The TS client's texts differ ("Invalid payload for X message."); we reject the same inputs with .NET's texts.
    @Test(arguments: [
        (#"{}"#, "Missing required property 'type'."),
        (#"{"type":1,"invocationId":1,"target":"method"}"#, "Expected 'invocationId' to be of type String."),
        (#"{"type":1,"invocationId":"1","target":1}"#, "Expected 'target' to be of type String."),
        (#"{"type":2}"#, "Missing required property 'invocationId'."),
        (#"{"type":2,"invocationId":1}"#, "Expected 'invocationId' to be of type String."),
        (#"{"type":3}"#, "Missing required property 'invocationId'."),
        (#"{"type":3,"invocationId":1}"#, "Expected 'invocationId' to be of type String."),
        (
            #"{"type":3,"invocationId":"1","result":2,"error":"error"}"#,
            "The 'error' and 'result' properties are mutually exclusive."
        ),
        (#"{"type":3,"invocationId":"1","error":21}"#, "Expected 'error' to be of type String."),
    ])
    func rejectsInvalidPayloads(_ payload: String, _ expected: String) {
        do {
            _ = try JSONHubProtocol.decode(Array(payload.utf8))
            Issue.record("accepted \(payload)")
        } catch {
            #expect(error.message == expected)
        }
    }

    @Test func readsMultipleMessages() throws {
        let payload =
            #"{"type":2, "invocationId": "abc", "headers": {}, "item": 8}"# + rs
            + #"{"type":3, "invocationId": "abc", "headers": {}, "result": "OK"}"# + rs
        let messages = try TextMessageFormat.parse(Array(payload.utf8)).map { try JSONHubProtocol.decode($0) }
        #expect(
            messages == [
                .streamItem(.init(invocationId: "abc", item: 8)),
                .completion(.init(invocationId: "abc", outcome: .result("OK"))),
            ])
    }

    @Test func roundTripsInvocationWithHeaders() throws {
        let m = HubMessage.invocation(
            .init(
                invocationId: "123", target: "myMethod",
                arguments: [42, true, "test", ["x1", "y2"], nil], headers: ["foo": "bar"]))
        let pieces = try TextMessageFormat.parse(JSONHubProtocol.encode(m))
        #expect(try JSONHubProtocol.decode(pieces[0]) == m)
    }
}

// Ported from dotnet/aspnetcore src/SignalR/clients/ts/signalr/tests/TextMessageFormat.test.ts
@Suite struct TextMessageFormatTests {
    @Test(arguments: [
        ("\u{1e}", [""]),
        ("\u{1e}\u{1e}", ["", ""]),
        ("Hello\u{1e}", ["Hello"]),
        ("Hello,\u{1e}World!\u{1e}", ["Hello,", "World!"]),
    ])
    func parses(_ payload: String, _ expected: [String]) throws {
        let pieces = try TextMessageFormat.parse(Array(payload.utf8))
        #expect(pieces.map { String(decoding: $0, as: UTF8.self) } == expected)
    }

    @Test(arguments: ["", "ABC", "ABC\u{1e}XYZ"])
    func rejectsIncomplete(_ payload: String) {
        #expect(throws: HubProtocolError("Message is incomplete.")) { try TextMessageFormat.parse(Array(payload.utf8)) }
    }

    @Test func splitKeepsTheCompleteMessagesBeforeAnIncompleteTail() {
        let (messages, incomplete) = TextMessageFormat.split(Array("A\u{1e}B\u{1e}C".utf8))
        #expect(messages.map { String(decoding: $0, as: UTF8.self) } == ["A", "B"])
        #expect(incomplete)
    }
}
