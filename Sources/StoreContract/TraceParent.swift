import Tracing

/// A span's context as the ledger keeps it with each delivery: the W3C `traceparent` the process's instrument writes
/// (the relay's OTLP tracer, when tracing is on), and back. With no such instrument both ways give nothing.
public enum TraceParent {
    /// The `traceparent` of `context`, if the instrument writes one.
    public static func of(_ context: ServiceContext) -> String? {
        var carrier: [String: String] = [:]
        InstrumentationSystem.instrument.inject(context, into: &carrier, using: Carrier())
        return carrier["traceparent"]
    }

    /// A context whose span is the one `traceParent` names, to start child spans in.
    public static func context(_ traceParent: String) -> ServiceContext {
        var context = ServiceContext.topLevel
        InstrumentationSystem.instrument.extract(["traceparent": traceParent], into: &context, using: Carrier())
        return context
    }

    private struct Carrier: Injector, Extractor {
        func inject(_ value: String, forKey key: String, into carrier: inout [String: String]) { carrier[key] = value }
        func extract(key: String, from carrier: [String: String]) -> String? { carrier[key] }
    }
}
