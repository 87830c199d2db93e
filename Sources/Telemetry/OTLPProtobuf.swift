import Tracing

/// OTLP's `ExportTraceServiceRequest` in protobuf's wire format (opentelemetry-proto's
/// `collector/trace/v1/trace_service.proto` and `trace/v1/trace.proto`): the body of an OTLP/HTTP export with
/// `Content-Type: application/x-protobuf`. Written by hand, field by field, rather than with swift-protobuf's
/// generated code: a few dozen lines against a runtime and a code generator.
enum OTLPProtobuf {
    /// One request: the resource (the process), one instrumentation scope, the spans.
    static func request(
        resource: [(String, SpanAttribute)], scope: (name: String, version: String), spans: [FinishedSpan]
    ) -> [UInt8] {
        var w = ProtobufWriter()
        w.message(1) { resourceSpans in  // ExportTraceServiceRequest.resource_spans
            resourceSpans.message(1) { r in  // ResourceSpans.resource
                for (key, value) in resource { r.message(1) { $0.keyValue(key, value) } }  // Resource.attributes
            }
            resourceSpans.message(2) { scopeSpans in  // ResourceSpans.scope_spans
                scopeSpans.message(1) { s in  // ScopeSpans.scope: InstrumentationScope
                    s.string(1, scope.name)
                    s.string(2, scope.version)
                }
                for span in spans { scopeSpans.message(2) { $0.span(span) } }  // ScopeSpans.spans
            }
        }
        return w.bytes
    }
}

/// Protobuf's wire format: varints, fixed 64-bit numbers, and length-delimited fields (strings, bytes, messages).
struct ProtobufWriter {
    private(set) var bytes: [UInt8] = []

    mutating func varint(_ value: UInt64) {
        var v = value
        while v >= 0x80 {
            bytes.append(UInt8(v & 0x7f) | 0x80)
            v >>= 7
        }
        bytes.append(UInt8(v))
    }

    mutating func key(_ field: Int, _ wireType: UInt64) { varint(UInt64(field) << 3 | wireType) }

    mutating func uint(_ field: Int, _ value: UInt64) {
        key(field, 0)
        varint(value)
    }

    mutating func fixed64(_ field: Int, _ value: UInt64) {
        key(field, 1)
        withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) }
    }

    mutating func fixed32(_ field: Int, _ value: UInt32) {
        key(field, 5)
        withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) }
    }

    mutating func bytes(_ field: Int, _ value: some Collection<UInt8>) {
        key(field, 2)
        varint(UInt64(value.count))
        bytes.append(contentsOf: value)
    }

    mutating func string(_ field: Int, _ value: String) { bytes(field, Array(value.utf8)) }

    /// A nested message: written apart, then as bytes (its length comes first).
    mutating func message(_ field: Int, _ body: (inout ProtobufWriter) -> Void) {
        var inner = ProtobufWriter()
        body(&inner)
        bytes(field, inner.bytes)
    }
}

extension ProtobufWriter {
    /// `Span`.
    mutating func span(_ s: FinishedSpan) {
        bytes(1, bigEndian(s.identity.traceHigh) + bigEndian(s.identity.traceLow))  // trace_id
        bytes(2, bigEndian(s.identity.spanID))  // span_id
        if let state = s.identity.traceState, !state.isEmpty { string(3, state) }  // trace_state
        if let parent = s.parentSpanID { bytes(4, bigEndian(parent)) }  // parent_span_id
        string(5, s.name)
        uint(6, Self.kind(s.kind))
        fixed64(7, s.start)  // start_time_unix_nano
        fixed64(8, s.end)
        s.attributes.forEach { key, value in message(9) { $0.keyValue(key, value) } }
        for event in s.events {
            message(11) { e in  // Span.Event
                e.fixed64(1, event.nanosecondsSinceEpoch)
                e.string(2, event.name)
                event.attributes.forEach { key, value in e.message(3) { $0.keyValue(key, value) } }
            }
        }
        if let status = s.status {
            message(15) { st in  // Status: message 2, code 3 (UNSET 0, OK 1, ERROR 2)
                if let text = status.message, !text.isEmpty { st.string(2, text) }
                st.uint(3, status.code == .ok ? 1 : 2)
            }
        }
        fixed32(16, s.identity.sampled ? 1 : 0)  // flags: the W3C trace flags
    }

    /// `KeyValue` with its `AnyValue`.
    mutating func keyValue(_ key: String, _ value: SpanAttribute) {
        string(1, key)
        message(2) { $0.anyValue(value) }
    }

    /// `AnyValue`: string 1, bool 2, int 3, double 4, array 5.
    mutating func anyValue(_ value: SpanAttribute) {
        switch value {
        case .int32(let n): uint(3, UInt64(bitPattern: Int64(n)))
        case .int64(let n): uint(3, UInt64(bitPattern: n))
        case .double(let d): fixed64(4, d.bitPattern)
        case .bool(let b): uint(2, b ? 1 : 0)
        case .string(let s): string(1, s)
        case .int32Array(let a): array(a.map { .int64(Int64($0)) })
        case .int64Array(let a): array(a.map { .int64($0) })
        case .doubleArray(let a): array(a.map { .double($0) })
        case .boolArray(let a): array(a.map { .bool($0) })
        case .stringArray(let a): array(a.map { .string($0) })
        case .stringConvertibleArray(let a): array(a.map { .string("\($0)") })
        case .stringConvertible(let s): string(1, "\(s)")
        default: string(1, "\(value)")
        }
    }

    private mutating func array(_ values: [SpanAttribute]) {
        message(5) { a in for v in values { a.message(1) { $0.anyValue(v) } } }
    }

    private func bigEndian(_ value: UInt64) -> [UInt8] { withUnsafeBytes(of: value.bigEndian) { Array($0) } }

    /// SpanKind: INTERNAL 1, SERVER 2, CLIENT 3, PRODUCER 4, CONSUMER 5.
    static func kind(_ kind: SpanKind) -> UInt64 {
        switch kind {
        case .server: 2
        case .client: 3
        case .producer: 4
        case .consumer: 5
        default: 1
        }
    }
}
