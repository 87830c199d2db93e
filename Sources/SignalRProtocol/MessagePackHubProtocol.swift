/// The MessagePack hub protocol ("messagepack", version 1 and 2): one hub message to and from a MessagePack array.
///
/// Follows the .NET reader and writer (HubProtocol.md, "MessagePack Encoding"): the fields by position, extra
/// trailing fields ignored, unknown message types ignored (nil), and the same error texts. Arguments become
/// `JSONValue`s as `MessagePackReader.readValue` describes; a server's objects are maps keyed by their .NET property
/// names (PascalCase), its decimals strings and its dates timestamps.
public enum MessagePackHubProtocol {
    public static let name = "messagepack"

    /// Decodes one message (without its length prefix). Returns nil for a message type this client does not know.
    public static func decode(_ bytes: some Collection<UInt8>) throws(HubProtocolError) -> HubMessage? {
        let array = Array(bytes)
        let result: Result<HubMessage?, HubProtocolError> = array.withUnsafeBytes { buffer in
            var reader = MessagePackReader(buffer)
            do throws(HubProtocolError) {
                return .success(try decode(&reader))
            } catch {
                return .failure(error)
            }
        }
        return try result.get()
    }

    static func decode(_ r: inout MessagePackReader) throws(HubProtocolError) -> HubMessage? {
        guard let count = r.readArrayHeader() else {
            throw HubProtocolError("Reading array length for 'message' failed.")
        }
        guard count > 0, let type = r.readInt() else {
            throw HubProtocolError("Reading 'messageType' as Int32 failed.")
        }
        switch type {
        case 1, 4:
            let headers = try readHeaders(&r)
            let id: String?
            if type == 1 && r.readNil() {
                id = nil
            } else {
                id = try string(&r, "invocationId")
            }
            let target = try string(&r, "target")
            guard let n = r.readArrayHeader() else {
                throw HubProtocolError("Reading array length for 'arguments' failed.")
            }
            var arguments: [JSONValue] = []
            arguments.reserveCapacity(n)
            for _ in 0..<n { arguments.append(try value(&r, "argument")) }
            var streamIds: [String] = []
            if count > 5 {
                guard let s = r.readArrayHeader() else {
                    throw HubProtocolError("Reading array length for 'streamIds' failed.")
                }
                for _ in 0..<s { streamIds.append(try string(&r, "streamId")) }
            }
            let invocation = HubMessage.Invocation(
                invocationId: id, target: target, arguments: arguments, streamIds: streamIds, headers: headers)
            return type == 1 ? .invocation(invocation) : .streamInvocation(invocation)
        case 2:
            let headers = try readHeaders(&r)
            let id = try string(&r, "invocationId")
            return .streamItem(.init(invocationId: id, item: try value(&r, "item"), headers: headers))
        case 3:
            let headers = try readHeaders(&r)
            let id = try string(&r, "invocationId")
            guard let kind = r.readInt() else { throw HubProtocolError("Reading 'resultKind' as Int32 failed.") }
            let outcome: HubMessage.Completion.Outcome
            switch kind {
            case 1: outcome = .error(try string(&r, "error"))
            case 2: outcome = .void
            case 3: outcome = .result(try value(&r, "argument"))
            default: throw HubProtocolError("Invalid invocation result kind.")
            }
            return .completion(.init(invocationId: id, outcome: outcome, headers: headers))
        case 5:
            let headers = try readHeaders(&r)
            return .cancelInvocation(invocationId: try string(&r, "invocationId"), headers: headers)
        case 6:
            return .ping
        case 7:
            let error: String? = r.readNil() ? nil : try string(&r, "error")
            var allowReconnect = false
            if count > 2 {
                guard let b = r.readBool() else {
                    throw HubProtocolError("Reading 'allowReconnect' as Boolean failed.")
                }
                allowReconnect = b
            }
            return .close(.init(error: error, allowReconnect: allowReconnect))
        case 8, 9:
            guard let id = r.readInt() else { throw HubProtocolError("Reading 'sequenceId' as Int64 failed.") }
            return type == 8 ? .ack(sequenceId: id) : .sequence(sequenceId: id)
        default:
            return nil  // a newer server's message type: ignored, as the protocol asks
        }
    }

    /// Encodes a message as a MessagePack array behind its length prefix, field for field as the .NET writer does.
    public static func encode(_ message: HubMessage) -> [UInt8] {
        var w = MessagePackWriter()
        func headers(_ h: [String: String]) {
            w.writeMapHeader(h.count)
            for (key, value) in h.sorted(by: { $0.key < $1.key }) {
                w.write(key)
                w.write(value)
            }
        }
        switch message {
        case .invocation(let m), .streamInvocation(let m):
            w.writeArrayHeader(6)
            w.write(Int64(message.isInvocation ? 1 : 4))
            headers(m.headers)
            if let id = m.invocationId { w.write(id) } else { w.writeNil() }
            w.write(m.target)
            w.write(JSONValue.array(m.arguments))
            w.writeArrayHeader(m.streamIds.count)
            for id in m.streamIds { w.write(id) }
        case .streamItem(let m):
            w.writeArrayHeader(4)
            w.write(Int64(2))
            headers(m.headers)
            w.write(m.invocationId)
            w.write(m.item)
        case .completion(let m):
            // ResultKind 1 = error text, 2 = void, 3 = result; void has no fifth field.
            let (kind, value): (Int64, JSONValue?) =
                switch m.outcome {
                case .error(let e): (1, .string(e))
                case .void: (2, nil)
                case .result(let v): (3, v)
                }
            w.writeArrayHeader(value == nil ? 4 : 5)
            w.write(Int64(3))
            headers(m.headers)
            w.write(m.invocationId)
            w.write(kind)
            if let value { w.write(value) }
        case .cancelInvocation(let id, let h):
            w.writeArrayHeader(3)
            w.write(Int64(5))
            headers(h)
            w.write(id)
        case .ping:
            w.writeArrayHeader(1)
            w.write(Int64(6))
        case .close(let c):
            w.writeArrayHeader(3)
            w.write(Int64(7))
            if let e = c.error { w.write(e) } else { w.writeNil() }
            w.write(c.allowReconnect)
        case .ack(let id), .sequence(let id):
            w.writeArrayHeader(2)
            w.write(Int64(message.isAck ? 8 : 9))
            w.write(id)
        }
        return BinaryMessageFormat.frame(w.bytes)
    }

    /// The routed fast path: an Invocation's target (lent as its bytes, not checked as UTF-8: compare it with known
    /// names), then its arguments read by `body` straight from the bytes (the reader is at the arguments array). nil
    /// when the message is anything else or `body` declines; the caller then decodes it with `decode`, which gives
    /// the exact error. Extra trailing fields are allowed, as in `decode`.
    public static func decodeInvocation<T>(
        _ bytes: UnsafeRawBufferPointer,
        _ body: (_ target: UnsafeRawBufferPointer, _ reader: inout MessagePackReader) -> T?
    ) -> T? {
        var r = MessagePackReader(bytes)
        guard let count = r.readArrayHeader(), count >= 5, r.readInt() == 1, let headers = r.readMapHeader(),
            headers == 0,
            r.readNil(), let target = r.readStringBytes()
        else { return nil }
        return body(UnsafeRawBufferPointer(target), &r)
    }

    // MARK: - Fields

    private static func readHeaders(_ r: inout MessagePackReader) throws(HubProtocolError) -> [String: String] {
        guard let n = r.readMapHeader() else { throw HubProtocolError("Reading map length for 'headers' failed.") }
        var headers: [String: String] = [:]
        for i in 0..<n {
            guard let key = r.readString() else {
                throw HubProtocolError("Reading 'headers[\(i)].Key' as String failed.")
            }
            guard let value = r.readString() else {
                throw HubProtocolError("Reading 'headers[\(i)].Value' as String failed.")
            }
            headers[key] = value
        }
        return headers
    }

    private static func string(_ r: inout MessagePackReader, _ field: String) throws(HubProtocolError) -> String {
        guard let s = r.readString() else { throw HubProtocolError("Reading '\(field)' as String failed.") }
        return s
    }

    private static func value(_ r: inout MessagePackReader, _ field: String) throws(HubProtocolError) -> JSONValue {
        guard let v = r.readValue() else {
            throw HubProtocolError(
                "Deserializing object for '\(field)' failed: the value is cut short, nested too deep or of an unknown kind."
            )
        }
        return v
    }
}

extension HubMessage {
    fileprivate var isInvocation: Bool { if case .invocation = self { true } else { false } }
    fileprivate var isAck: Bool { if case .ack = self { true } else { false } }
}

/// The binary transfer format: every message behind its length as a VarInt (7 bits a byte, low bits first, the
/// high bit set on every byte but the last; at most 5 bytes, so under 2 GiB).
public enum BinaryMessageFormat {
    public static func frame(_ payload: [UInt8]) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(payload.count + 5)
        var length = payload.count
        repeat {
            var byte = UInt8(length & 0x7F)
            length >>= 7
            if length > 0 { byte |= 0x80 }
            out.append(byte)
        } while length > 0
        out.append(contentsOf: payload)
        return out
    }

    /// Splits one complete transport message into hub messages. A prefix that claims more than is there cannot be
    /// finished by a later message (each is whole), so it is reported as incomplete, after the good ones.
    public static func split(
        _ bytes: some Collection<UInt8>
    ) throws(HubProtocolError) -> (messages: [ArraySlice<UInt8>], incomplete: Bool) {
        let array = Array(bytes)
        var messages: [ArraySlice<UInt8>] = []
        var i = 0
        while i < array.count {
            var length = 0
            var shift = 0
            var byte: UInt8
            repeat {
                guard i < array.count else { return (messages, true) }
                guard shift < 35 else { throw HubProtocolError("Messages over 2GB in size are not supported.") }
                byte = array[i]
                length |= Int(byte & 0x7F) << shift
                shift += 7
                i += 1
            } while byte & 0x80 != 0
            guard length <= Int(Int32.max) else {
                throw HubProtocolError("Messages over 2GB in size are not supported.")
            }
            guard length <= array.count - i else { return (messages, true) }
            messages.append(array[i..<i + length])
            i += length
        }
        return (messages, array.isEmpty)
    }
}
