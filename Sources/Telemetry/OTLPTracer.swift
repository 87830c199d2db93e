import Core
import Synchronization
import Tracing

/// A span as it ended, for the exporter.
struct FinishedSpan: Sendable {
    var name: String
    var kind: SpanKind
    var identity: SpanIdentity
    var parentSpanID: UInt64?
    var start: UInt64
    var end: UInt64
    var attributes: SpanAttributes
    var events: [SpanEvent]
    var status: SpanStatus?
}

/// The relay's tracer: spans with W3C Trace Context identities, handed at their end to an `OTLPExporter`, and the
/// `traceparent` / `tracestate` headers both ways. A span whose parent was not sampled is not recorded (a context
/// is still made, so that its children say the same downstream), nor is one started while the exporter's queue is
/// full (it would be dropped at its end: a blast then costs no span work beyond the ids).
public struct OTLPTracer: Tracer {
    let exporter: OTLPExporter
    /// Span and trace ids: xoshiro256** seeded from the system's generator, which costs a system call a number
    /// (measured: a quarter of tracing's cost on a blast). Random enough for ids, as W3C Trace Context asks.
    private static let ids = Mutex(Xoshiro256StarStar())

    public init(exporter: OTLPExporter) {
        self.exporter = exporter
    }

    public func startSpan<Instant: TracerInstant>(
        _ operationName: String, context: @autoclosure () -> ServiceContext, ofKind kind: SpanKind,
        at instant: @autoclosure () -> Instant,
        function: String, file fileID: String, line: UInt
    ) -> OTLPSpan {
        var context = context()
        let parent = context.spanIdentity
        let ids = Self.ids.withLock { random in
            func nonZero() -> UInt64 {
                var n: UInt64 = 0
                while n == 0 { n = random.next() }
                return n
            }
            return parent == nil ? (random.next(), nonZero(), nonZero()) : (0, 0, nonZero())
        }
        let identity = SpanIdentity(
            traceHigh: parent?.traceHigh ?? ids.0, traceLow: parent?.traceLow ?? ids.1, spanID: ids.2,
            sampled: parent?.sampled ?? true, traceState: parent?.traceState)
        context.spanIdentity = identity
        return OTLPSpan(
            name: operationName, kind: kind, context: context, identity: identity, parentSpanID: parent?.spanID,
            start: instant().nanosecondsSinceEpoch, exporter: identity.sampled && exporter.admits() ? exporter : nil)
    }

    public func forceFlush() {}

    public func inject<Carrier, Inject: Injector>(
        _ context: ServiceContext, into carrier: inout Carrier, using injector: Inject
    )
    where Inject.Carrier == Carrier {
        guard let identity = context.spanIdentity else { return }
        injector.inject(identity.traceparent, forKey: "traceparent", into: &carrier)
        if let state = identity.traceState, !state.isEmpty {
            injector.inject(state, forKey: "tracestate", into: &carrier)
        }
    }

    public func extract<Carrier, Extract: Extractor>(
        _ carrier: Carrier, into context: inout ServiceContext, using extractor: Extract
    )
    where Extract.Carrier == Carrier {
        guard let header = extractor.extract(key: "traceparent", from: carrier),
            var identity = SpanIdentity(traceparent: header)
        else { return }
        identity.traceState = extractor.extract(key: "tracestate", from: carrier)
        context.spanIdentity = identity
    }
}

/// One span of `OTLPTracer`. Changes after its end are ignored; a span that is not sampled records nothing.
public final class OTLPSpan: Span {
    public let context: ServiceContext
    public let kind: SpanKind
    let identity: SpanIdentity
    private let parentSpanID: UInt64?
    private let start: UInt64
    private let exporter: OTLPExporter?
    private let state: Mutex<State>

    private struct State {
        var name: String
        var attributes = SpanAttributes()
        var events: [SpanEvent] = []
        var status: SpanStatus?
        var ended = false
    }

    init(
        name: String, kind: SpanKind, context: ServiceContext, identity: SpanIdentity, parentSpanID: UInt64?,
        start: UInt64,
        exporter: OTLPExporter?
    ) {
        self.context = context
        self.kind = kind
        self.identity = identity
        self.parentSpanID = parentSpanID
        self.start = start
        self.exporter = exporter
        state = Mutex(State(name: name))
    }

    public var isRecording: Bool { exporter != nil && !state.withLock { $0.ended } }

    public var operationName: String {
        get { state.withLock { $0.name } }
        set { change { $0.name = newValue } }
    }

    public var attributes: SpanAttributes {
        get { state.withLock { $0.attributes } }
        set { change { $0.attributes = newValue } }
    }

    public func setStatus(_ status: SpanStatus) { change { $0.status = status } }

    public func addEvent(_ event: SpanEvent) { change { $0.events.append(event) } }

    /// An `exception` event, as OpenTelemetry's conventions name it.
    public func recordError<Instant: TracerInstant>(
        _ error: any Error, attributes: SpanAttributes, at instant: @autoclosure () -> Instant
    ) {
        var attributes = attributes
        attributes["exception.type"] = String(reflecting: type(of: error))
        attributes["exception.message"] = "\(error)"
        addEvent(SpanEvent(name: "exception", at: instant(), attributes: attributes))
    }

    /// Links are not exported (nothing here makes them).
    public func addLink(_ link: SpanLink) {}

    public func end<Instant: TracerInstant>(at instant: @autoclosure () -> Instant) {
        guard let exporter else { return }
        let finished = state.withLock { s -> FinishedSpan? in
            guard !s.ended else { return nil }
            s.ended = true
            return FinishedSpan(
                name: s.name, kind: kind, identity: identity, parentSpanID: parentSpanID, start: start,
                end: instant().nanosecondsSinceEpoch, attributes: s.attributes, events: s.events, status: s.status)
        }
        if let finished { exporter.add(finished) }
    }

    private func change(_ body: (inout State) -> Void) {
        guard exporter != nil else { return }
        state.withLock { s in if !s.ended { body(&s) } }
    }
}
