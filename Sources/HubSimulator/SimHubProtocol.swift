import Foundation

/// A hub message as the simulator knows it, written from HubProtocol.md (ASP.NET Core's spec), not from the client.
enum SimMessage: Sendable, Equatable {
    struct Invocation: Sendable, Equatable {
        var id: String?
        var target: String
        var arguments: [SimValue]
        var headers: [String: String] = [:]
        var streamIds: [String] = []
    }
    enum Outcome: Sendable, Equatable {
        case result(SimValue)
        case error(String)
        case void
    }

    case invocation(Invocation)
    case streamItem(id: String, item: SimValue)
    case completion(id: String, Outcome)
    case streamInvocation(Invocation)
    case cancelInvocation(id: String)
    case ping
    case close(error: String?, allowReconnect: Bool)
    case ack(Int64)
    case sequence(Int64)

    /// An event for every client: an Invocation without an id (no answer wanted).
    static func event(_ target: String, _ arguments: [SimValue]) -> SimMessage {
        .invocation(.init(id: nil, target: target, arguments: arguments))
    }

    /// Counted by stateful reconnect's Ack and Sequence (HubProtocol.md: every message but Ping, Close, Ack, Sequence).
    var isSequenced: Bool {
        switch self {
        case .invocation, .streamItem, .completion, .streamInvocation, .cancelInvocation: true
        case .ping, .close, .ack, .sequence: false
        }
    }
}

/// The JSON hub protocol: each message a JSON object ending in the record separator 0x1E.
enum SimJSONHubProtocol {
    static let separator: UInt8 = 0x1E

    static func encode(_ message: SimMessage) -> [UInt8] {
        object(message).bytes + [separator]
    }

    /// The message as ASP.NET Core's JsonHubProtocol writes it: `type` first, then the fields in its order.
    static func object(_ message: SimMessage) -> SimValue {
        func invocation(_ type: Int, _ m: SimMessage.Invocation) -> [(String, SimValue)] {
            var o: [(String, SimValue)] = [("type", .number(Decimal(type)))]
            if !m.headers.isEmpty {
                o.append(("headers", .object(m.headers.sorted { $0.key < $1.key }.map { ($0.key, .string($0.value)) })))
            }
            if let id = m.id { o.append(("invocationId", .string(id))) }
            o += [("target", .string(m.target)), ("arguments", .array(m.arguments))]
            if !m.streamIds.isEmpty { o.append(("streamIds", .array(m.streamIds.map(SimValue.string)))) }
            return o
        }
        switch message {
        case .invocation(let m): return .object(invocation(1, m))
        case .streamInvocation(let m): return .object(invocation(4, m))
        case .streamItem(let id, let item): return ["type": 2, "invocationId": .string(id), "item": item]
        case .completion(let id, .result(let v)): return ["type": 3, "invocationId": .string(id), "result": v]
        case .completion(let id, .error(let e)): return ["type": 3, "invocationId": .string(id), "error": .string(e)]
        case .completion(let id, .void): return ["type": 3, "invocationId": .string(id)]
        case .cancelInvocation(let id): return ["type": 5, "invocationId": .string(id)]
        case .ping: return ["type": 6]
        case .close(let error, let allowReconnect):
            var o: [(String, SimValue)] = [("type", 7)]
            if let error { o.append(("error", .string(error))) }
            if allowReconnect { o.append(("allowReconnect", true)) }
            return .object(o)
        case .ack(let id): return ["type": 8, "sequenceId": .number(Decimal(id))]
        case .sequence(let id): return ["type": 9, "sequenceId": .number(Decimal(id))]
        }
    }

    /// The messages of one transport message: every piece must end in 0x1E. nil entries: a `type` not known (ignored,
    /// as the spec asks).
    static func decode(_ bytes: [UInt8]) throws(SimJSON.Malformed) -> [SimMessage?] {
        guard bytes.last == separator else {
            throw SimJSON.Malformed(description: "a message without its record separator (0x1E)")
        }
        var messages: [SimMessage?] = []
        for piece in bytes.split(separator: separator, omittingEmptySubsequences: false).dropLast() {
            messages.append(try message(SimJSON.parse(piece)))
        }
        return messages
    }

    static func message(_ v: SimValue) throws(SimJSON.Malformed) -> SimMessage? {
        guard case .object = v, let type = v["type"]?.intValue else {
            throw SimJSON.Malformed(description: "a message that is not an object with a numeric type")
        }
        func string(_ key: String) throws(SimJSON.Malformed) -> String {
            guard let s = v[key]?.stringValue else {
                throw SimJSON.Malformed(description: "type \(type) without a string \(key)")
            }
            return s
        }
        func headers() throws(SimJSON.Malformed) -> [String: String] {
            guard let h = v["headers"], !h.isNull else { return [:] }
            guard case .object(let o) = h else {
                throw SimJSON.Malformed(description: "headers that are not an object")
            }
            var out: [String: String] = [:]
            for (name, value) in o {
                guard let text = value.stringValue else {
                    throw SimJSON.Malformed(description: "header \(name) is not a string")
                }
                out[name] = text
            }
            return out
        }
        switch type {
        case 1, 4:
            guard case .array(let arguments)? = v["arguments"] else {
                throw SimJSON.Malformed(description: "an invocation without arguments")
            }
            var streamIds: [String] = []
            if case .array(let ids)? = v["streamIds"] { streamIds = ids.compactMap(\.stringValue) }
            let m = SimMessage.Invocation(
                id: type == 4 ? try string("invocationId") : v["invocationId"]?.stringValue,
                target: try string("target"),
                arguments: arguments, headers: try headers(), streamIds: streamIds)
            return type == 1 ? .invocation(m) : .streamInvocation(m)
        case 2:
            guard let item = v["item"] else { throw SimJSON.Malformed(description: "a stream item without item") }
            return .streamItem(id: try string("invocationId"), item: item)
        case 3:
            let id = try string("invocationId")
            switch (v["result"], v["error"]) {
            case (.some, .some): throw SimJSON.Malformed(description: "a completion with both result and error")
            case (.some(let r), nil): return .completion(id: id, .result(r))
            case (nil, .some): return .completion(id: id, .error(try string("error")))
            case (nil, nil): return .completion(id: id, .void)
            }
        case 5: return .cancelInvocation(id: try string("invocationId"))
        case 6: return .ping
        case 7: return .close(error: v["error"]?.stringValue, allowReconnect: v["allowReconnect"] == .bool(true))
        case 8, 9:
            guard let n = v["sequenceId"]?.intValue else {
                throw SimJSON.Malformed(description: "type \(type) without a sequenceId")
            }
            return type == 8 ? .ack(Int64(n)) : .sequence(Int64(n))
        default: return nil
        }
    }
}

/// The handshake, always JSON text ending in 0x1E, whatever protocol it chooses.
enum SimHandshake {
    struct Request: Equatable {
        var protocolName: String
        var version: Int
    }

    /// The request and what follows it in `bytes`; nil while its separator has not arrived.
    static func request(_ bytes: [UInt8]) throws(SimJSON.Malformed) -> (Request, ArraySlice<UInt8>)? {
        guard let end = bytes.firstIndex(of: SimJSONHubProtocol.separator) else { return nil }
        let v = try SimJSON.parse(bytes[..<end])
        guard let name = v["protocol"]?.stringValue else {
            throw SimJSON.Malformed(
                description:
                    "Missing required property 'protocol'. Message content: \(String(decoding: bytes[..<end], as: UTF8.self))"
            )
        }
        guard let version = v["version"]?.intValue else {
            throw SimJSON.Malformed(
                description:
                    "Missing required property 'version'. Message content: \(String(decoding: bytes[..<end], as: UTF8.self))"
            )
        }
        return (Request(protocolName: name, version: version), bytes[(end + 1)...])
    }

    /// `{}` accepts; `{"error": ...}` refuses.
    static func response(error: String? = nil) -> [UInt8] {
        (error.map { ["error": .string($0)] } ?? SimValue.object([])).bytes + [SimJSONHubProtocol.separator]
    }
}

/// Negotiate's answer (TransportProtocols.md): version 1 with a secret connection token, version 0 without.
struct SimNegotiation {
    var connectionId: String
    var connectionToken: String?
    var negotiateVersion: Int
    var transports: [(name: String, formats: [String])]
    var statefulReconnect: Bool
    /// With authentication refresh (signalr-protocol.md section 11): how long the connection's token has left.
    var tokenLifetimeSeconds: Int?

    var json: [UInt8] {
        var o: [(String, SimValue)] = [
            ("negotiateVersion", .number(Decimal(negotiateVersion))), ("connectionId", .string(connectionId)),
        ]
        if let connectionToken { o.append(("connectionToken", .string(connectionToken))) }
        o.append(
            (
                "availableTransports",
                .array(
                    transports.map {
                        ["transport": .string($0.name), "transferFormats": .array($0.formats.map(SimValue.string))]
                    })
            ))
        if statefulReconnect { o.append(("useStatefulReconnect", true)) }
        if let tokenLifetimeSeconds { o.append(("tokenLifetimeSeconds", .number(Decimal(tokenLifetimeSeconds)))) }
        return SimValue.object(o).bytes
    }
}
