/// The answer to `POST {hub}/negotiate`: a connection to open, a redirect to follow, or an error.
public enum NegotiateResponse: Sendable, Equatable {
    case connection(Connection)
    /// Azure SignalR Service and friends: negotiate again at `url`, with `accessToken` for the rest of this start.
    case redirect(url: String, accessToken: String?)
    case error(String)

    public struct Connection: Sendable, Equatable {
        public var connectionId: String
        /// The secret that goes in `id=` on the WebSocket URL (v1). Never log it.
        public var connectionToken: String?
        public var negotiateVersion: Int
        public var availableTransports: [Transport]
        public var useStatefulReconnect: Bool
        /// ASP.NET Core 11, with authentication refresh on: how long the token negotiate was given lives (the
        /// client refreshes it before then with `POST {hub}/refresh?id=`).
        public var tokenLifetimeSeconds: Int?

        public init(
            connectionId: String, connectionToken: String? = nil, negotiateVersion: Int = 0,
            availableTransports: [Transport] = [], useStatefulReconnect: Bool = false, tokenLifetimeSeconds: Int? = nil
        ) {
            self.tokenLifetimeSeconds = tokenLifetimeSeconds
            self.connectionId = connectionId
            self.connectionToken = connectionToken
            self.negotiateVersion = negotiateVersion
            self.availableTransports = availableTransports
            self.useStatefulReconnect = useStatefulReconnect
        }

        /// What goes in `id=`: the token from a v1 server, the connection id from a v0 one.
        public var socketId: String { connectionToken ?? connectionId }
    }

    public struct Transport: Sendable, Equatable {
        public var transport: String
        public var transferFormats: [String]

        public init(transport: String, transferFormats: [String]) {
            self.transport = transport
            self.transferFormats = transferFormats
        }
    }

    static let classicServerMessage =
        "Detected a connection attempt to an ASP.NET SignalR Server. This client only supports connecting to an ASP.NET Core SignalR Server. See https://aka.ms/signalr-core-differences for details."

    /// Parses a negotiate body with the .NET reader's rules and error texts.
    public static func decode(_ bytes: some Collection<UInt8>) throws(HubProtocolError) -> NegotiateResponse {
        let members = try Handshake.topLevelObject(ArraySlice(bytes))
        var connectionId: String?
        var connectionToken: String?
        var version = 0
        var url: String?
        var accessToken: String?
        var error: String?
        var transports: [Transport]?
        var stateful = false
        var lifetime: Int?
        for (key, value) in members {
            switch key {
            case "url":
                guard case .string(let s) = value else { throw .expected("url", "String") }
                url = s
            case "accessToken":
                guard case .string(let s) = value else { throw .expected("accessToken", "String") }
                accessToken = s
            case "connectionId":
                guard case .string(let s) = value else { throw .expected("connectionId", "String") }
                connectionId = s
            case "connectionToken":
                guard case .string(let s) = value else { throw .expected("connectionToken", "String") }
                connectionToken = s
            case "negotiateVersion":
                guard case .number = value, let v = value.intValue else {
                    throw .expected("negotiateVersion", "Number")
                }
                version = v
            case "availableTransports":
                guard case .array(let items) = value else { throw .unexpectedToken(value, expected: "Array") }
                transports = try items.map { (item) throws(HubProtocolError) -> Transport in try transport(item) }
            case "error":
                guard case .string(let s) = value else { throw .expected("error", "String") }
                error = s
            case "useStatefulReconnect":
                guard case .bool(let b) = value else { throw .expected("useStatefulReconnect", "Boolean") }
                stateful = b
            case "tokenLifetimeSeconds":
                guard case .number = value, let v = value.intValue else {
                    throw .expected("tokenLifetimeSeconds", "Number")
                }
                lifetime = v
            case "ProtocolVersion":
                throw HubProtocolError(classicServerMessage)
            default: break
            }
        }
        if let error { return .error(error) }
        if let url { return .redirect(url: url, accessToken: accessToken) }
        guard let connectionId else { throw .missing("connectionId") }
        if version > 0 && connectionToken == nil { throw .missing("connectionToken") }
        return .connection(
            Connection(
                connectionId: connectionId, connectionToken: connectionToken, negotiateVersion: version,
                availableTransports: transports ?? [], useStatefulReconnect: stateful, tokenLifetimeSeconds: lifetime))
    }

    private static func transport(_ value: JSONValue) throws(HubProtocolError) -> Transport {
        guard case .object(let members) = value else { throw .unexpectedToken(value, expected: "Object") }
        var name: String?
        var formats: [String]?
        for (key, v) in members {
            switch key {
            case "transport":
                guard case .string(let s) = v else { throw .expected("transport", "String") }
                name = s
            case "transferFormats":
                guard case .array(let a) = v else { throw .unexpectedToken(v, expected: "Array") }
                formats = a.compactMap(\.stringValue)
            default: break
            }
        }
        guard let name else { throw .missing("transport") }
        guard let formats else { throw .missing("transferFormats") }
        return Transport(transport: name, transferFormats: formats)
    }

    /// Encodes a v1 answer (used by servers such as the hub simulator).
    public static func encode(_ c: Connection) -> [UInt8] {
        var members: [(key: String, value: JSONValue)] = [
            ("negotiateVersion", .number(String(c.negotiateVersion))),
            ("connectionId", .string(c.connectionId)),
        ]
        if let t = c.connectionToken { members.append(("connectionToken", .string(t))) }
        if c.useStatefulReconnect { members.append(("useStatefulReconnect", true)) }
        if let lifetime = c.tokenLifetimeSeconds { members.append(("tokenLifetimeSeconds", .number(String(lifetime)))) }
        members.append(
            (
                "availableTransports",
                .array(
                    c.availableTransports.map {
                        .object([
                            ("transport", .string($0.transport)),
                            ("transferFormats", .array($0.transferFormats.map { .string($0) })),
                        ])
                    })
            ))
        var out: [UInt8] = []
        JSONValue.object(members).write(into: &out)
        return out
    }
}
