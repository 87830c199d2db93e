/// The handshake that opens every connection: the client names the protocol, the server answers `{}` or an error.
public enum Handshake {
    public struct Request: Sendable, Equatable {
        public var protocolName: String
        public var version: Int

        public init(protocolName: String = JSONHubProtocol.name, version: Int = 1) {
            self.protocolName = protocolName
            self.version = version
        }
    }

    public struct Response: Sendable, Equatable {
        public var error: String?
        public var minorVersion: Int?

        public init(error: String? = nil, minorVersion: Int? = nil) {
            self.error = error
            self.minorVersion = minorVersion
        }
    }

    public static func encode(_ request: Request) -> [UInt8] {
        TextMessageFormat.frame(
            JSONValue.object([
                ("protocol", .string(request.protocolName)), ("version", .number(String(request.version))),
            ])
            .serialized.utf8)
    }

    public static func encode(_ response: Response) -> [UInt8] {
        var members: [(key: String, value: JSONValue)] = []
        if let e = response.error { members.append(("error", .string(e))) }
        if let v = response.minorVersion { members.append(("minorVersion", .number(String(v)))) }
        return TextMessageFormat.frame(JSONValue.object(members).serialized.utf8)
    }

    /// Reads the server's answer from the front of `buffer`. Returns nil until a whole record (0x1E) is there;
    /// otherwise the answer and whatever follows it (hub messages can share the frame with the answer).
    public static func decodeResponse(
        _ buffer: some Collection<UInt8>
    ) throws(HubProtocolError) -> (response: Response, rest: ArraySlice<UInt8>)? {
        let bytes = Array(buffer)
        guard let end = bytes.firstIndex(of: TextMessageFormat.recordSeparator) else { return nil }
        let object = try topLevelObject(bytes[..<end])
        var response = Response()
        for (key, value) in object {
            switch key {
            case "type":
                // A hub message where the handshake answer belongs (the TypeScript client's check and text).
                throw HubProtocolError("Expected a handshake response from the server.")
            case "error":
                guard case .string(let s) = value else { throw .expected("error", "String") }
                response.error = s
            case "minorVersion":
                guard case .number = value, let v = value.intValue else { throw .expected("minorVersion", "Number") }
                response.minorVersion = v
            default: break
            }
        }
        return (response, bytes[(end + 1)...])
    }

    /// Reads a client's request (used by servers such as the hub simulator). Nil until a whole record is there.
    public static func decodeRequest(
        _ buffer: some Collection<UInt8>
    ) throws(HubProtocolError) -> (request: Request, rest: ArraySlice<UInt8>)? {
        let bytes = Array(buffer)
        guard let end = bytes.firstIndex(of: TextMessageFormat.recordSeparator) else { return nil }
        let text = String(decoding: bytes[..<end], as: UTF8.self)
        let object = try topLevelObject(bytes[..<end])
        var name: String?
        var version: Int?
        for (key, value) in object {
            switch key {
            case "protocol":
                guard case .string(let s) = value else { throw .expected("protocol", "String") }
                name = s
            case "version":
                guard case .number = value, let v = value.intValue else { throw .expected("version", "Number") }
                version = v
            default: break
            }
        }
        guard let name else { throw HubProtocolError("Missing required property 'protocol'. Message content: \(text)") }
        guard let version else {
            throw HubProtocolError("Missing required property 'version'. Message content: \(text)")
        }
        return (Request(protocolName: name, version: version), bytes[(end + 1)...])
    }

    static func topLevelObject(_ bytes: ArraySlice<UInt8>) throws(HubProtocolError) -> [(key: String, value: JSONValue)]
    {
        let value: JSONValue
        do { value = try JSONParser.parse(bytes) } catch { throw HubProtocolError(error) }
        guard case .object(let members) = value else { throw .unexpectedToken(value, expected: "Object") }
        return members
    }
}
