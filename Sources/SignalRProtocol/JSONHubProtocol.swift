/// The JSON hub protocol ("json", version 1 and 2): one hub message to and from its JSON text.
///
/// Decoding follows the .NET reader: properties in any order, case-sensitive names, unknown properties
/// ignored, unknown message types ignored (nil), each property's type checked as it is read, and the
/// same error texts.
public enum JSONHubProtocol {
    public static let name = "json"

    /// Decodes one message (without its 0x1E). Returns nil for a message type this client does not know.
    public static func decode(_ bytes: some Collection<UInt8>) throws(HubProtocolError) -> HubMessage? {
        var fields = Fields()
        let array = Array(bytes)
        let result: Result<Void, HubProtocolError> = array.withUnsafeBufferPointer { buffer in
            var parser = JSONParser(buffer)
            parser.skipWhitespace()
            if parser.peek() != UInt8(ascii: "{") {
                do throws(JSONSyntaxError) {
                    let value = try parser.parseValue()
                    return .failure(.unexpectedToken(value, expected: "Object"))
                } catch {
                    return .failure(HubProtocolError(error))
                }
            }
            do throws(JSONObjectReadError<HubProtocolError>) {
                try parser.parseObject { (key, value) throws(HubProtocolError) in try fields.read(key, value) }
            } catch {
                switch error {
                case .syntax(let e): return .failure(HubProtocolError(e))
                case .member(let e): return .failure(e)
                }
            }
            do throws(JSONSyntaxError) {
                try parser.expectEnd()
            } catch {
                return .failure(HubProtocolError(error))
            }
            return .success(())
        }
        try result.get()
        return try fields.message()
    }

    /// Encodes a message as compact JSON followed by 0x1E, with the property order of the .NET writer.
    public static func encode(_ message: HubMessage) -> [UInt8] {
        var members: [(key: String, value: JSONValue)] = []
        func headers(_ h: [String: String]) {
            if !h.isEmpty {
                members.append(("headers", .object(h.sorted { $0.key < $1.key }.map { ($0.key, .string($0.value)) })))
            }
        }
        switch message {
        case .invocation(let m), .streamInvocation(let m):
            let type = if case .invocation = message { 1 } else { 4 }
            members.append(("type", .number(String(type))))
            headers(m.headers)
            if let id = m.invocationId { members.append(("invocationId", .string(id))) }
            members.append(("target", .string(m.target)))
            members.append(("arguments", .array(m.arguments)))
            if !m.streamIds.isEmpty { members.append(("streamIds", .array(m.streamIds.map { .string($0) }))) }
        case .streamItem(let m):
            members.append(("type", 2))
            headers(m.headers)
            members.append(("invocationId", .string(m.invocationId)))
            members.append(("item", m.item))
        case .completion(let m):
            members.append(("type", 3))
            headers(m.headers)
            members.append(("invocationId", .string(m.invocationId)))
            switch m.outcome {
            case .void: break
            case .result(let r): members.append(("result", r))
            case .error(let e): members.append(("error", .string(e)))
            }
        case .cancelInvocation(let id, let h):
            members.append(("type", 5))
            headers(h)
            members.append(("invocationId", .string(id)))
        case .ping:
            members.append(("type", 6))
        case .close(let m):
            members.append(("type", 7))
            if let e = m.error { members.append(("error", .string(e))) }
            if m.allowReconnect { members.append(("allowReconnect", true)) }
        case .ack(let id):
            members.append(("type", 8))
            members.append(("sequenceId", .number(String(id))))
        case .sequence(let id):
            members.append(("type", 9))
            members.append(("sequenceId", .number(String(id))))
        }
        var out: [UInt8] = []
        out.reserveCapacity(64)
        JSONValue.object(members).write(into: &out)
        out.append(TextMessageFormat.recordSeparator)
        return out
    }

    /// The properties of one message as they are read.
    private struct Fields {
        var type: Int?
        var invocationId: String?
        var target: String?
        var arguments: [JSONValue]?
        var streamIds: [String] = []
        var headers: [String: String] = [:]
        var item: JSONValue?
        var result: JSONValue?
        var error: String?
        var allowReconnect = false
        var sequenceId: Int64?

        mutating func read(_ key: String, _ value: JSONValue) throws(HubProtocolError) {
            switch key {
            case "type":
                guard case .number = value, let t = value.intValue else { throw .expected("type", "Number") }
                type = t
            case "invocationId":
                guard case .string(let s) = value else { throw .expected("invocationId", "String") }
                invocationId = s
            case "target":
                guard case .string(let s) = value else { throw .expected("target", "String") }
                target = s
            case "arguments":
                guard case .array(let a) = value else { throw .expected("arguments", "Array") }
                arguments = a
            case "streamIds":
                guard case .array(let a) = value else { throw .expected("streamIds", "Array") }
                streamIds = []
                for id in a {
                    guard case .string(let s) = id else { throw .expected("streamIds", "Array of String") }
                    streamIds.append(s)
                }
            case "headers":
                guard case .object(let members) = value else { throw .expected("headers", "Object") }
                for (k, v) in members {
                    guard case .string(let s) = v else {
                        throw HubProtocolError("Expected header '\(k)' to be of type String.")
                    }
                    headers[k] = s
                }
            case "item":
                item = value
            case "result":
                result = value
            case "error":
                guard case .string(let s) = value else { throw .expected("error", "String") }
                error = s
            case "allowReconnect":
                guard case .bool(let b) = value else { throw .expected("allowReconnect", "Boolean") }
                allowReconnect = b
            case "sequenceId":
                guard case .number(let n) = value, let id = Int64(n) else { throw .expected("sequenceId", "Number") }
                sequenceId = id
            default:
                break  // unknown properties are ignored
            }
        }

        func requireInvocationId() throws(HubProtocolError) -> String {
            guard let id = invocationId else { throw .missing("invocationId") }
            return id
        }

        func message() throws(HubProtocolError) -> HubMessage? {
            guard let type else { throw .missing("type") }
            switch type {
            case 1, 4:
                let id = type == 4 ? try requireInvocationId() : invocationId
                guard let target else { throw .missing("target") }
                guard let arguments else { throw .missing("arguments") }
                let m = HubMessage.Invocation(
                    invocationId: id, target: target, arguments: arguments, streamIds: streamIds, headers: headers)
                return type == 1 ? .invocation(m) : .streamInvocation(m)
            case 2:
                let id = try requireInvocationId()
                guard let item else { throw .missing("item") }
                return .streamItem(.init(invocationId: id, item: item, headers: headers))
            case 3:
                let id = try requireInvocationId()
                if error != nil && result != nil {
                    throw HubProtocolError("The 'error' and 'result' properties are mutually exclusive.")
                }
                let outcome: HubMessage.Completion.Outcome =
                    if let error { .error(error) } else if let result { .result(result) } else { .void }
                return .completion(.init(invocationId: id, outcome: outcome, headers: headers))
            case 5:
                return .cancelInvocation(invocationId: try requireInvocationId(), headers: headers)
            case 6:
                return .ping
            case 7:
                return .close(.init(error: error, allowReconnect: allowReconnect))
            case 8, 9:
                guard let sequenceId else { throw .missing("sequenceId") }
                return type == 8 ? .ack(sequenceId: sequenceId) : .sequence(sequenceId: sequenceId)
            default:
                return nil  // a newer protocol's message: ignore it (forward compatibility)
            }
        }
    }
}
