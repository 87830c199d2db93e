import Foundation

/// The simulator's own MessagePack, written apart from the client's codec (a tree of values, packed and unpacked
/// recursively) so that a mistake made on one side is not made on the other. It writes what an ASP.NET Core hub
/// writes with its default resolvers: objects as maps keyed by PascalCase property names, money (C# `decimal`) as
/// strings, dates as the timestamp extension, GUIDs as strings.
indirect enum SimPack: Equatable {
    // swift-format-ignore: AlwaysUseLowerCamelCase
    case nil_
    case bool(Bool)
    case int(Int64)
    case uint(UInt64)
    case double(Double)
    case string(String)
    case binary([UInt8])
    case array([SimPack])
    case map([(SimPack, SimPack)])
    case timestamp(Date)
    case ext(Int8, [UInt8])

    static func == (a: SimPack, b: SimPack) -> Bool {
        switch (a, b) {
        case (.nil_, .nil_): true
        case (.bool(let x), .bool(let y)): x == y
        case (.int(let x), .int(let y)): x == y
        case (.uint(let x), .uint(let y)): x == y
        case (.double(let x), .double(let y)): x == y
        case (.string(let x), .string(let y)): x == y
        case (.binary(let x), .binary(let y)): x == y
        case (.array(let x), .array(let y)): x == y
        case (.map(let x), .map(let y)): x.count == y.count && zip(x, y).allSatisfy { $0.0 == $1.0 && $0.1 == $1.1 }
        case (.timestamp(let x), .timestamp(let y)): x == y
        case (.ext(let t, let x), .ext(let u, let y)): t == u && x == y
        default: false
        }
    }

    // MARK: - Packing

    func pack(into out: inout [UInt8]) {
        func be<T: FixedWidthInteger>(_ v: T) { out += withUnsafeBytes(of: v.bigEndian, Array.init) }
        func length(_ n: Int, small: UInt8?, smallMax: Int, _ c8: UInt8?, _ c16: UInt8, _ c32: UInt8) {
            if let small, n <= smallMax {
                out.append(small + UInt8(n))
            } else if let c8, n <= 0xFF {
                out += [c8, UInt8(n)]
            } else if n <= 0xFFFF {
                out.append(c16)
                be(UInt16(n))
            } else {
                out.append(c32)
                be(UInt32(n))
            }
        }
        switch self {
        case .nil_: out.append(0xC0)
        case .bool(let b): out.append(b ? 0xC3 : 0xC2)
        case .int(let i) where i >= 0: SimPack.uint(UInt64(i)).pack(into: &out)
        case .int(let i):
            if i >= -32 {
                out.append(UInt8(bitPattern: Int8(i)))
            } else if i >= -128 {
                out.append(0xD0)
                be(Int8(i))
            } else if i >= -32768 {
                out.append(0xD1)
                be(Int16(i))
            } else if i >= Int64(Int32.min) {
                out.append(0xD2)
                be(Int32(i))
            } else {
                out.append(0xD3)
                be(i)
            }
        case .uint(let u):
            if u < 128 {
                out.append(UInt8(u))
            } else if u <= 0xFF {
                out += [0xCC, UInt8(u)]
            } else if u <= 0xFFFF {
                out.append(0xCD)
                be(UInt16(u))
            } else if u <= 0xFFFF_FFFF {
                out.append(0xCE)
                be(UInt32(u))
            } else {
                out.append(0xCF)
                be(u)
            }
        case .double(let d):
            out.append(0xCB)
            be(d.bitPattern)
        case .string(let s):
            let utf8 = Array(s.utf8)
            length(utf8.count, small: 0xA0, smallMax: 31, 0xD9, 0xDA, 0xDB)
            out += utf8
        case .binary(let b):
            length(b.count, small: nil, smallMax: 0, 0xC4, 0xC5, 0xC6)
            out += b
        case .array(let items):
            length(items.count, small: 0x90, smallMax: 15, nil, 0xDC, 0xDD)
            for item in items { item.pack(into: &out) }
        case .map(let pairs):
            length(pairs.count, small: 0x80, smallMax: 15, nil, 0xDE, 0xDF)
            for (k, v) in pairs {
                k.pack(into: &out)
                v.pack(into: &out)
            }
        case .timestamp(let date):
            // The smallest of the three forms, as MessagePack-CSharp picks it.
            let whole = date.timeIntervalSince1970.rounded(.down)
            let seconds = Int64(whole)
            // To the microsecond: a Date's Double cannot tell nanoseconds 1.7e9 s after 1970.
            let nanos = UInt32(min(999_999, max(0, ((date.timeIntervalSince1970 - whole) * 1e6).rounded()))) * 1000
            if seconds >= 0 && seconds >> 34 == 0 {
                if nanos == 0 && seconds <= 0xFFFF_FFFF {
                    out += [0xD6, 0xFF]
                    be(UInt32(seconds))
                } else {
                    out += [0xD7, 0xFF]
                    be(UInt64(nanos) << 34 | UInt64(seconds))
                }
            } else {
                out += [0xC7, 12, 0xFF]
                be(nanos)
                be(seconds)
            }
        case .ext(let type, let body):
            out += [0xC7, UInt8(body.count), UInt8(bitPattern: type)]
            out += body
        }
    }

    // MARK: - Unpacking

    struct Malformed: Error { let reason: String }

    /// One value from `bytes` at `i`, recursively; `i` moves past it.
    static func unpack(_ bytes: [UInt8], _ i: inout Int, depth: Int = 0) throws -> SimPack {
        guard depth < 100 else { throw Malformed(reason: "nested too deep") }
        func need(_ n: Int) throws {
            if n < 0 || i + n > bytes.count { throw Malformed(reason: "cut short") }
        }
        func uint(_ size: Int) throws -> UInt64 {
            try need(size)
            var v: UInt64 = 0
            for b in bytes[i..<(i + size)] { v = v << 8 | UInt64(b) }
            i += size
            return v
        }
        func raw(_ n: Int) throws -> [UInt8] {
            try need(n)
            defer { i += n }
            return Array(bytes[i..<(i + n)])
        }
        func text(_ n: Int) throws -> SimPack {
            guard let s = String(validating: try raw(n), as: UTF8.self) else {
                throw Malformed(reason: "a string that is not UTF-8")
            }
            return .string(s)
        }
        func items(_ n: Int) throws -> [SimPack] {
            try need(n)  // at least a byte each
            return try (0..<n).map { _ in try unpack(bytes, &i, depth: depth + 1) }
        }
        func pairs(_ n: Int) throws -> [(SimPack, SimPack)] {
            try need(2 * n)
            return try (0..<n).map { _ in
                (try unpack(bytes, &i, depth: depth + 1), try unpack(bytes, &i, depth: depth + 1))
            }
        }
        func ext(_ n: Int) throws -> SimPack {
            let type = Int8(bitPattern: try raw(1)[0])
            let body = try raw(n)
            guard type == -1 else { return .ext(type, body) }
            var j = 0
            func field(_ size: Int) -> UInt64 {
                defer { j += size }
                return body[j..<(j + size)].reduce(0) { $0 << 8 | UInt64($1) }
            }
            switch n {
            case 4: return .timestamp(Date(timeIntervalSince1970: Double(field(4))))
            case 8:
                let v = field(8)
                return .timestamp(Date(timeIntervalSince1970: Double(v & 0x3_FFFF_FFFF) + Double(v >> 34) / 1e9))
            case 12:
                let nanos = field(4)
                return .timestamp(
                    Date(timeIntervalSince1970: Double(Int64(bitPattern: field(8))) + Double(nanos) / 1e9))
            default: throw Malformed(reason: "a timestamp of \(n) bytes")
            }
        }
        try need(1)
        let b = bytes[i]
        i += 1
        switch b {
        case 0x00...0x7F: return .int(Int64(b))
        case 0x80...0x8F: return .map(try pairs(Int(b & 0x0F)))
        case 0x90...0x9F: return .array(try items(Int(b & 0x0F)))
        case 0xA0...0xBF: return try text(Int(b & 0x1F))
        case 0xC0: return .nil_
        case 0xC2: return .bool(false)
        case 0xC3: return .bool(true)
        case 0xC4: return .binary(try raw(Int(try uint(1))))
        case 0xC5: return .binary(try raw(Int(try uint(2))))
        case 0xC6: return .binary(try raw(Int(try uint(4))))
        case 0xC7: return try ext(Int(try uint(1)))
        case 0xC8: return try ext(Int(try uint(2)))
        case 0xC9: return try ext(Int(try uint(4)))
        case 0xCA: return .double(Double(Float(bitPattern: UInt32(try uint(4)))))
        case 0xCB: return .double(Double(bitPattern: try uint(8)))
        case 0xCC: return .int(Int64(try uint(1)))
        case 0xCD: return .int(Int64(try uint(2)))
        case 0xCE: return .int(Int64(try uint(4)))
        case 0xCF:
            let u = try uint(8)
            return u <= UInt64(Int64.max) ? .int(Int64(u)) : .uint(u)
        case 0xD0: return .int(Int64(Int8(truncatingIfNeeded: try uint(1))))
        case 0xD1: return .int(Int64(Int16(truncatingIfNeeded: try uint(2))))
        case 0xD2: return .int(Int64(Int32(truncatingIfNeeded: try uint(4))))
        case 0xD3: return .int(Int64(bitPattern: try uint(8)))
        case 0xD4: return try ext(1)
        case 0xD5: return try ext(2)
        case 0xD6: return try ext(4)
        case 0xD7: return try ext(8)
        case 0xD8: return try ext(16)
        case 0xD9: return try text(Int(try uint(1)))
        case 0xDA: return try text(Int(try uint(2)))
        case 0xDB: return try text(Int(try uint(4)))
        case 0xDC: return .array(try items(Int(try uint(2))))
        case 0xDD: return .array(try items(Int(try uint(4))))
        case 0xDE: return .map(try pairs(Int(try uint(2))))
        case 0xDF: return .map(try pairs(Int(try uint(4))))
        case 0xE0...0xFF: return .int(Int64(Int8(bitPattern: b)))
        default: throw Malformed(reason: "the format byte 0x\(String(b, radix: 16)) (never used)")
        }
    }
}

/// The hub's messages to and from the simulator's MessagePack (HubProtocol.md's arrays, behind VarInt lengths).
enum SimMessagePackProtocol {
    /// One server message, framed. Invocations (the hub's events) carry their arguments in the ASP.NET Core shape.
    static func encode(_ message: SimMessage) -> [UInt8] {
        let none = SimPack.map([])
        func invocation(_ type: Int64, _ m: SimMessage.Invocation) -> [SimPack] {
            let headers = SimPack.map(m.headers.sorted { $0.key < $1.key }.map { (.string($0.key), .string($0.value)) })
            return [
                .int(type), headers, m.id.map(SimPack.string) ?? .nil_, .string(m.target),
                .array(m.arguments.map { dotNet($0) }), .array(m.streamIds.map(SimPack.string)),
            ]
        }
        let array: [SimPack]
        switch message {
        case .invocation(let m): array = invocation(1, m)
        case .streamInvocation(let m): array = invocation(4, m)
        case .streamItem(let id, let item): array = [.int(2), none, .string(id), plain(item)]
        case .completion(let id, .error(let e)): array = [.int(3), none, .string(id), .int(1), .string(e)]
        case .completion(let id, .void): array = [.int(3), none, .string(id), .int(2)]
        case .completion(let id, .result(let v)): array = [.int(3), none, .string(id), .int(3), plain(v)]
        case .cancelInvocation(let id): array = [.int(5), none, .string(id)]
        case .ping: array = [.int(6)]
        case .close(let error, let allowReconnect):
            array = [.int(7), error.map(SimPack.string) ?? .nil_, .bool(allowReconnect)]
        case .ack(let id): array = [.int(8), .int(id)]
        case .sequence(let id): array = [.int(9), .int(id)]
        }
        var body: [UInt8] = []
        SimPack.array(array).pack(into: &body)
        var out: [UInt8] = []
        var n = body.count
        while n >= 0x80 {
            out.append(UInt8(n & 0x7F) | 0x80)
            n >>= 7
        }
        out.append(UInt8(n))
        return out + body
    }

    /// The client's messages in `bytes` (whole ones; a cut-off one is an error). nil entries: a type not known.
    static func decode(_ bytes: [UInt8]) throws -> [SimMessage?] {
        var i = 0
        var messages: [SimMessage?] = []
        while i < bytes.count {
            var length = 0
            var shift = 0
            while true {
                guard i < bytes.count, shift <= 28 else { throw SimPack.Malformed(reason: "a bad length prefix") }
                let b = bytes[i]
                i += 1
                length |= Int(b & 0x7F) << shift
                shift += 7
                if b < 0x80 { break }
            }
            guard i + length <= bytes.count else {
                throw SimPack.Malformed(reason: "a message shorter than its length")
            }
            let body = Array(bytes[i..<(i + length)])
            i += length
            var j = 0
            messages.append(try message(SimPack.unpack(body, &j)))
        }
        return messages
    }

    private static func message(_ value: SimPack) throws -> SimMessage? {
        guard case .array(let a) = value, case .int(let type)? = a.first else {
            throw SimPack.Malformed(reason: "not an array with a type")
        }
        func str(_ k: Int) throws -> String {
            guard k < a.count, case .string(let s) = a[k] else {
                throw SimPack.Malformed(reason: "field \(k) is not a string")
            }
            return s
        }
        func heads() -> [String: String] {
            guard a.count > 1, case .map(let pairs) = a[1] else { return [:] }
            var h: [String: String] = [:]
            for case (.string(let k), .string(let v)) in pairs { h[k] = v }
            return h
        }
        switch type {
        case 1, 4:
            let id: String? = a.count > 2 && a[2] == .nil_ ? nil : try str(2)
            guard a.count > 4, case .array(let args) = a[4] else {
                throw SimPack.Malformed(reason: "no arguments array")
            }
            var streamIds: [String] = []
            if a.count > 5, case .array(let ids) = a[5] {
                streamIds = ids.compactMap { if case .string(let s) = $0 { s } else { nil } }
            }
            let invocation = SimMessage.Invocation(
                id: id, target: try str(3), arguments: args.map(json), headers: heads(), streamIds: streamIds)
            return type == 1 ? .invocation(invocation) : .streamInvocation(invocation)
        case 2: return .streamItem(id: try str(2), item: a.count > 3 ? json(a[3]) : .null)
        case 3:
            guard a.count > 3, case .int(let kind) = a[3] else { throw SimPack.Malformed(reason: "no result kind") }
            let outcome: SimMessage.Outcome =
                switch kind {
                case 1: .error(try str(4))
                case 3: .result(a.count > 4 ? json(a[4]) : .null)
                default: .void
                }
            return .completion(id: try str(2), outcome)
        case 5: return .cancelInvocation(id: try str(2))
        case 6: return .ping
        case 7:
            let error: String? = a.count > 1 && a[1] != .nil_ ? try str(1) : nil
            return .close(error: error, allowReconnect: a.count > 2 && a[2] == .bool(true))
        case 8, 9:
            guard a.count > 1, case .int(let id) = a[1] else { throw SimPack.Malformed(reason: "no sequence id") }
            return type == 8 ? .ack(id) : .sequence(id)
        default: return nil
        }
    }

    /// A value as the JSON the simulator's hub methods read.
    static func json(_ v: SimPack) -> SimValue {
        switch v {
        case .nil_: .null
        case .bool(let b): .bool(b)
        case .int(let i): .number(Decimal(i))
        case .uint(let u): .number(Decimal(u))
        case .double(let d): .number(Decimal(d))
        case .string(let s): .string(s)
        case .binary(let b): .string(Data(b).base64EncodedString())
        case .array(let items): .array(items.map(json))
        case .map(let pairs):
            // Keys that are not strings are named by their kind only: a client's nested keys must not be rendered.
            .object(
                pairs.map { (k, v) in
                    (json(k).stringValue ?? (k == .nil_ ? "null" : "\(k)".prefix(40).description), json(v))
                })
        case .timestamp(let d): .string(d.formatted(.iso8601))
        case .ext: .null
        }
    }

    /// A result or stream item: whole numbers stay integers (the test methods return ints), objects keep their keys.
    static func plain(_ v: SimValue) -> SimPack {
        switch v {
        case .null: .nil_
        case .bool(let b): .bool(b)
        case .number(let n):
            v.intValue.map { SimPack.int(Int64($0)) } ?? .double(NSDecimalNumber(decimal: n).doubleValue)
        case .string(let s): .string(s)
        case .array(let items): .array(items.map(plain))
        case .object(let members): .map(members.map { (.string($0.0), plain($0.1)) })
        }
    }

    /// An event argument as ASP.NET Core's MessagePack writes the hub's C# types: the property names PascalCase, money
    /// (every number the hub's events carry is a `decimal`) as its text, a date as a timestamp.
    static func dotNet(_ v: SimValue) -> SimPack {
        switch v {
        case .null: .nil_
        case .bool(let b): .bool(b)
        case .number(let n): .string(n.description)
        case .string(let s): isoDate(s).map(SimPack.timestamp) ?? .string(s)
        case .array(let items): .array(items.map(dotNet))
        case .object(let members):
            .map(members.map { (.string($0.0.prefix(1).uppercased() + $0.0.dropFirst()), dotNet($0.1)) })
        }
    }

    private static func isoDate(_ s: String) -> Date? {
        guard s.count >= 20, s.utf8.dropFirst(10).first == UInt8(ascii: "T") else { return nil }
        return (try? Date.ISO8601FormatStyle(includingFractionalSeconds: true).parse(s))
            ?? (try? Date.ISO8601FormatStyle().parse(s))
    }
}
