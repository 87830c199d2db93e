/// Which hub protocol a connection speaks, named as in the handshake: how its messages are written, cut out of a
/// transport message, and read.
public enum HubProtocolKind: String, Sendable, CaseIterable {
    case json
    case messagepack

    /// What a transport must carry for it: MessagePack is binary, so Server-Sent Events (text only) cannot.
    public var transferFormat: TransferFormat { self == .json ? .text : .binary }

    /// One message, framed (0x1E after JSON, a length before MessagePack).
    public func encode(_ message: HubMessage) -> [UInt8] {
        switch self {
        case .json: JSONHubProtocol.encode(message)
        case .messagepack: MessagePackHubProtocol.encode(message)
        }
    }

    /// The hub messages of one whole transport message, and whether something was left unfinished after them.
    public func split(
        _ bytes: some Collection<UInt8>
    ) throws(HubProtocolError) -> (messages: [ArraySlice<UInt8>], incomplete: Bool) {
        switch self {
        case .json: TextMessageFormat.split(bytes)
        case .messagepack: try BinaryMessageFormat.split(bytes)
        }
    }

    /// One message, unframed; nil for a type this client does not know.
    public func decode(_ piece: some Collection<UInt8>) throws(HubProtocolError) -> HubMessage? {
        switch self {
        case .json: try JSONHubProtocol.decode(piece)
        case .messagepack: try MessagePackHubProtocol.decode(piece)
        }
    }
}

/// The transfer formats of the negotiate answer's `transferFormats`.
public enum TransferFormat: String, Sendable {
    case text = "Text"
    case binary = "Binary"
}

/// The transports of TransportProtocols.md, named as the negotiate answer names them.
public enum TransportKind: String, Sendable, CaseIterable {
    case webSockets = "WebSockets"
    case serverSentEvents = "ServerSentEvents"
    case longPolling = "LongPolling"

    /// Server-Sent Events carry text only.
    public func carries(_ format: TransferFormat) -> Bool { self != .serverSentEvents || format == .text }
}
