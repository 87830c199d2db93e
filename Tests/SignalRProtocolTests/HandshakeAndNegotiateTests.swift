import SignalRProtocol
import Testing

// Ported from dotnet/aspnetcore src/SignalR/common/SignalR.Common/test/Internal/Protocol/HandshakeProtocolTests.cs
@Suite struct HandshakeProtocolTests {
    @Test(arguments: [
        ("{\"protocol\":\"dummy\",\"version\":1}\u{1e}", "dummy", 1),
        ("{\"protocol\":\"\",\"version\":10}\u{1e}", "", 10),
        ("{\"protocol\":\"\",\"version\":10,\"unknown\":null}\u{1e}", "", 10),
        // As Python's json module writes it (signalrcore): spaces after the separators.
        ("{\"protocol\": \"json\", \"version\": 1}\u{1e}", "json", 1),
    ])
    func parsesValidRequests(_ json: String, _ name: String, _ version: Int) throws {
        let parsed = try #require(try Handshake.decodeRequest(Array(json.utf8)))
        #expect(parsed.request == Handshake.Request(protocolName: name, version: version))
        #expect(parsed.rest.isEmpty)
    }

    @Test(arguments: [
        ("{\"error\":\"dummy\"}\u{1e}", "dummy" as String?),
        ("{\"error\":\"\"}\u{1e}", ""),
        ("{}\u{1e}", nil),
        ("{\"unknown\":null}\u{1e}", nil),
    ])
    func parsesValidResponses(_ json: String, _ error: String?) throws {
        let parsed = try #require(try Handshake.decodeResponse(Array(json.utf8)))
        #expect(parsed.response.error == error)
    }

    @Test(arguments: [
        ("{\"error\":\"\",\"minorVersion\":34}\u{1e}", 34),
        ("{\"error\":\"flump flump flump\",\"minorVersion\":112}\u{1e}", 112),
    ])
    func responseGivesMinorVersion(_ json: String, _ version: Int) throws {
        #expect(try Handshake.decodeResponse(Array(json.utf8))?.response.minorVersion == version)
    }

    @Test func incompleteRequestIsNotAnError() throws {
        #expect(try Handshake.decodeRequest(Array("42".utf8)) == nil)
    }

    @Test(arguments: [
        ("42\u{1e}", "Unexpected JSON Token Type 'Number'. Expected a JSON Object."),
        ("\"42\"\u{1e}", "Unexpected JSON Token Type 'String'. Expected a JSON Object."),
        ("null\u{1e}", "Unexpected JSON Token Type 'Null'. Expected a JSON Object."),
        ("{}\u{1e}", "Missing required property 'protocol'. Message content: {}"),
        ("[]\u{1e}", "Unexpected JSON Token Type 'Array'. Expected a JSON Object."),
        (
            "{\"protocol\":\"json\"}\u{1e}",
            "Missing required property 'version'. Message content: {\"protocol\":\"json\"}"
        ),
        ("{\"version\":1}\u{1e}", "Missing required property 'protocol'. Message content: {\"version\":1}"),
        (
            "{\"type\":4,\"invocationId\":\"42\",\"target\":\"foo\",\"arguments\":{}}\u{1e}",
            "Missing required property 'protocol'. Message content: {\"type\":4,\"invocationId\":\"42\",\"target\":\"foo\",\"arguments\":{}}"
        ),
        ("{\"version\":\"123\"}\u{1e}", "Expected 'version' to be of type Number."),
        ("{\"protocol\":null,\"version\":123}\u{1e}", "Expected 'protocol' to be of type String."),
    ])
    func rejectsInvalidRequests(_ payload: String, _ expected: String) {
        #expect(throws: HubProtocolError(expected)) { try Handshake.decodeRequest(Array(payload.utf8)) }
    }

    @Test(arguments: [
        ("42\u{1e}", "Unexpected JSON Token Type 'Number'. Expected a JSON Object."),
        ("\"42\"\u{1e}", "Unexpected JSON Token Type 'String'. Expected a JSON Object."),
        ("null\u{1e}", "Unexpected JSON Token Type 'Null'. Expected a JSON Object."),
        ("[]\u{1e}", "Unexpected JSON Token Type 'Array'. Expected a JSON Object."),
        ("{\"error\":null}\u{1e}", "Expected 'error' to be of type String."),
        // From the TS client's HandshakeProtocol: a hub message is not a handshake answer.
        ("{\"type\":1,\"target\":\"A\",\"arguments\":[]}\u{1e}", "Expected a handshake response from the server."),
    ])
    func rejectsInvalidResponses(_ payload: String, _ expected: String) {
        #expect(throws: HubProtocolError(expected)) { try Handshake.decodeResponse(Array(payload.utf8)) }
    }

    @Test func responseSharingAFrameWithHubMessagesKeepsTheRest() throws {
        let frame = "{}\u{1e}{\"type\":6}\u{1e}{\"type\":1,\"target\":\"A\",\"arguments\":[]}\u{1e}"
        let parsed = try #require(try Handshake.decodeResponse(Array(frame.utf8)))
        #expect(parsed.response == Handshake.Response())
        let rest = try TextMessageFormat.parse(parsed.rest).map { try JSONHubProtocol.decode($0) }
        #expect(rest == [.ping, .invocation(.init(target: "A", arguments: []))])
    }

    @Test func writesTheRequestTheServerExpects() {
        #expect(Handshake.encode(Handshake.Request()) == Array("{\"protocol\":\"json\",\"version\":1}\u{1e}".utf8))
    }
}

// Ported from dotnet/aspnetcore src/SignalR/common/Http.Connections/test/NegotiateProtocolTests.cs.
// The version property is named "negotiateVersion" as current servers send it (older test copies say "version").
@Suite struct NegotiateProtocolTests {
    @Test(arguments: [
        (#"{"connectionId":"123","availableTransports":[]}"#, "123", [String](), 0),
        (#"{"connectionId":"","availableTransports":[]}"#, "", [], 0),
        (
            #"{"connectionId":"123","availableTransports":[{"transport":"test","transferFormats":[]}]}"#, "123",
            ["test"], 0
        ),
        (
            #"{"connectionId":"123","availableTransports":[{"\u0074ransport":"test","transferFormats":[]}]}"#, "123",
            ["test"], 0
        ),
        (
            #"{"negotiateVersion":123,"connectionId":"123","connectionToken":"t","availableTransports":[{"\u0074ransport":"test","transferFormats":[]}]}"#,
            "123", ["test"], 123
        ),
        (
            #"{"negotiateVersion":123,"negotiateVersion":321,"connectionId":"123","connectionToken":"t","availableTransports":[]}"#,
            "123", [], 321
        ),
        (
            #"{"ignore":123,"negotiateVersion":123,"connectionId":"123","connectionToken":"t","availableTransports":[]}"#,
            "123", [], 123
        ),
        (
            #"{"connectionId":"123","connectionToken":"t","availableTransports":[],"negotiateVersion":123}"#, "123", [],
            123
        ),
    ])
    func parsesValidConnections(_ json: String, _ id: String, _ transports: [String], _ version: Int) throws {
        guard case .connection(let c) = try NegotiateResponse.decode(Array(json.utf8)) else {
            Issue.record("not a connection")
            return
        }
        #expect(c.connectionId == id)
        #expect(c.availableTransports.map(\.transport) == transports)
        #expect(c.negotiateVersion == version)
        #expect(c.socketId == (version > 0 ? "t" : id), "v0 servers: the connection id goes in id=")
    }

    @Test func parsesRedirects() throws {
        #expect(
            try NegotiateResponse.decode(Array(#"{"url": "http://foo.com/chat"}"#.utf8))
                == .redirect(url: "http://foo.com/chat", accessToken: nil))
        #expect(
            try NegotiateResponse.decode(Array(#"{"url": "http://foo.com/chat", "accessToken": "token"}"#.utf8))
                == .redirect(url: "http://foo.com/chat", accessToken: "token"))
    }

    @Test func parsesErrorsAndStatefulReconnect() throws {
        #expect(
            try NegotiateResponse.decode(Array(#"{"error":"Negotiate failed"}"#.utf8)) == .error("Negotiate failed"))
        let json =
            #"{"negotiateVersion":1,"connectionId":"a","connectionToken":"b","useStatefulReconnect":true,"availableTransports":[]}"#
        guard case .connection(let c) = try NegotiateResponse.decode(Array(json.utf8)) else {
            Issue.record("no connection")
            return
        }
        #expect(c.useStatefulReconnect)
    }

    @Test(arguments: [
        ("null", "Unexpected JSON Token Type 'Null'. Expected a JSON Object."),
        ("[]", "Unexpected JSON Token Type 'Array'. Expected a JSON Object."),
        (#"{"availableTransports":[]}"#, "Missing required property 'connectionId'."),
        (#"{"connectionId":123,"availableTransports":[]}"#, "Expected 'connectionId' to be of type String."),
        (
            #"{"connectionId":"123","availableTransports":null}"#,
            "Unexpected JSON Token Type 'Null'. Expected a JSON Array."
        ),
        (
            #"{"connectionId":"123","availableTransports":[{"transferFormats":[]}]}"#,
            "Missing required property 'transport'."
        ),
        (
            #"{"connectionId":"123","availableTransports":[{"transport":"test"}]}"#,
            "Missing required property 'transferFormats'."
        ),
        (
            #"{"negotiateVersion":1,"connectionId":"123","availableTransports":[]}"#,
            "Missing required property 'connectionToken'."
        ),
    ])
    func rejectsInvalid(_ payload: String, _ expected: String) {
        #expect(throws: HubProtocolError(expected)) { try NegotiateResponse.decode(Array(payload.utf8)) }
    }

    @Test func detectsClassicAspNetSignalR() {
        let payload =
            #"{"Url":"/signalr","ConnectionToken":"X97dw3uxW4NPPggQsYVcNcyQcuz4w2","ConnectionId":"05265228-1e2c-46c5-82a1-6a5bcc3f0143","KeepAliveTimeout":10.0,"DisconnectTimeout":5.0,"TryWebSockets":true,"ProtocolVersion":"1.5","TransportConnectTimeout":30.0,"LongPollDelay":0.0}"#
        #expect(
            throws: HubProtocolError(
                "Detected a connection attempt to an ASP.NET SignalR Server. This client only supports connecting to an ASP.NET Core SignalR Server. See https://aka.ms/signalr-core-differences for details."
            )
        ) { try NegotiateResponse.decode(Array(payload.utf8)) }
    }
}

@Suite struct JSONValueTests {
    @Test(arguments: ["0.1", "19.99", "1e-2", "12345678.91", "-5.25", "123456789012345678901234567890"])
    func numbersKeepTheirExactText(_ literal: String) throws {
        let m = try JSONHubProtocol.decode(Array("{\"type\":2,\"invocationId\":\"1\",\"item\":\(literal)}".utf8))
        #expect(m == .streamItem(.init(invocationId: "1", item: .number(literal))))
    }

    @Test(arguments: [
        "{\"type\":1,\"target\":\"a\",\"arguments\":[\"\\ud800\"]}",  // lone surrogate
        "{\"type\":1,\"target\":\"a\",\"arguments\":[01]}",  // leading zero
        "{\"type\":1,\"target\":\"a\",\"arguments\":[1,]}",  // trailing comma
        "{\"type\":6} trailing",
        String(repeating: "[", count: 100_000),  // deep nesting must not overflow the stack
    ])
    func rejectsMalformedJSON(_ text: String) {
        #expect(throws: HubProtocolError.self) { try JSONHubProtocol.decode(Array(text.utf8)) }
    }

    @Test func rejectsInvalidUTF8() {
        var bytes = Array("{\"type\":1,\"target\":\"".utf8)
        bytes += [0xC3, 0x28]
        bytes += Array("\",\"arguments\":[]}".utf8)
        #expect(throws: HubProtocolError.self) { try JSONHubProtocol.decode(bytes) }
    }

    @Test func escapesRoundTrip() throws {
        let s = "quote \" backslash \\ nl \n tab \t ctl \u{01} emoji 🎉 é"
        let m = HubMessage.invocation(.init(target: "T", arguments: [.string(s)]))
        let pieces = try TextMessageFormat.parse(JSONHubProtocol.encode(m))
        #expect(try JSONHubProtocol.decode(pieces[0]) == m)
    }
}
