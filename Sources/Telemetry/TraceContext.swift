import Tracing

/// Who a span is, as W3C Trace Context says it: the trace (16 bytes), the span (8 bytes), whether it is sampled, and
/// the vendors' `tracestate`, passed on untouched. It rides in a `ServiceContext`, for the spans started in it and
/// for `traceparent` headers.
public struct SpanIdentity: Sendable, Hashable {
    public var traceHigh: UInt64
    public var traceLow: UInt64
    public var spanID: UInt64
    public var sampled: Bool
    public var traceState: String?

    public init(traceHigh: UInt64, traceLow: UInt64, spanID: UInt64, sampled: Bool = true, traceState: String? = nil) {
        (self.traceHigh, self.traceLow, self.spanID, self.sampled, self.traceState) = (
            traceHigh, traceLow, spanID, sampled, traceState
        )
    }

    /// `00-<trace>-<span>-<flags>`, in lower-case hex.
    public var traceparent: String { "00-\(traceID)-\(Self.hex(spanID))-\(sampled ? "01" : "00")" }
    public var traceID: String { Self.hex(traceHigh) + Self.hex(traceLow) }

    /// A `traceparent` header as the W3C recommendation reads it: version `ff` and all-zero ids are invalid, hex
    /// is lower-case, and a later version may add fields after the flags (read past, as it asks). nil: invalid,
    /// and the receiver starts a trace of its own.
    public init?(traceparent text: String) {
        let b = Array(text.utf8)
        guard b.count >= 55, b[2] == UInt8(ascii: "-"), b[35] == UInt8(ascii: "-"), b[52] == UInt8(ascii: "-"),
            let version = Self.number(b[0..<2]), version != 0xff,
            version == 0 ? b.count == 55 : (b.count == 55 || b[55] == UInt8(ascii: "-")),
            let high = Self.number(b[3..<19]), let low = Self.number(b[19..<35]), high | low != 0,
            let span = Self.number(b[36..<52]), span != 0, let flags = Self.number(b[53..<55])
        else { return nil }
        self.init(traceHigh: high, traceLow: low, spanID: span, sampled: flags & 1 == 1)
    }

    static func hex(_ value: UInt64) -> String {
        let digits = String(value, radix: 16)
        return String(repeating: "0", count: 16 - digits.count) + digits
    }

    /// Lower-case hex digits only (the recommendation's grammar), at most 16 of them.
    private static func number(_ digits: ArraySlice<UInt8>) -> UInt64? {
        var value: UInt64 = 0
        for d in digits {
            switch d {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): value = value << 4 | UInt64(d - UInt8(ascii: "0"))
            case UInt8(ascii: "a")...UInt8(ascii: "f"): value = value << 4 | UInt64(d - UInt8(ascii: "a") + 10)
            default: return nil
            }
        }
        return value
    }
}

private enum SpanIdentityKey: ServiceContextKey {
    typealias Value = SpanIdentity
    static let nameOverride: String? = "span-identity"
}

extension ServiceContext {
    /// The span this context is in (ours, or a remote one read from `traceparent`).
    public var spanIdentity: SpanIdentity? {
        get { self[SpanIdentityKey.self] }
        set { self[SpanIdentityKey.self] = newValue }
    }
}
