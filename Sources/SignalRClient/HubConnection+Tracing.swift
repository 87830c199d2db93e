import Foundation
import Instrumentation
import SignalRProtocol
import Tracing

// Spans through swift-distributed-tracing, for whatever tracer the program bootstraps (swift-otel's, say); with none,
// the no-op tracer makes them cost next to nothing. As the .NET client does (.NET 9 and later), each invocation is a
// client span named `{hub}/{method}` with `rpc.system`, `rpc.service`, `rpc.method`, `server.address` and
// `server.port`, and its context goes to the server in the invocation's `headers` (W3C `traceparent` and
// `tracestate` with a W3C tracer). A connection attempt is a span with negotiate inside it; a handler run is a
// consumer span, continuing the server's trace when the invocation carries one. Events routed into a buffer
// (`on(_:into:)`) make no span each: that path is measured in events per CPU second.
extension HubConnection {
    /// The hub's name in span names: the URL's last path component (`family` for `/hubs/family`).
    nonisolated var hubName: String {
        let last = url.lastPathComponent
        return last.isEmpty || last == "/" ? "hub" : last
    }

    /// A client span for an invocation of `target`, and the headers that carry its context to the server.
    func invocationSpan(_ target: String) -> (span: any Span, headers: [String: String]) {
        let tracer = InstrumentationSystem.tracer
        let span = tracer.startSpan(
            "\(hubName)/\(target)", context: ServiceContext.current ?? .topLevel, ofKind: .client)
        span.attributes["rpc.system"] = "signalr"
        span.attributes["rpc.service"] = hubName
        span.attributes["rpc.method"] = target
        span.attributes["server.address"] = url.host ?? ""
        span.attributes["server.port"] = url.port ?? (url.scheme?.lowercased() == "https" ? 443 : 80)
        var headers: [String: String] = [:]
        tracer.inject(span.context, into: &headers, using: HubHeaders())
        return (span, headers)
    }

    /// A span for one connection attempt (`{hub} connect`), or its negotiate inside `parent`.
    func linkSpan(_ name: String, parent: ServiceContext? = nil) -> any Span {
        let span = InstrumentationSystem.tracer.startSpan(
            "\(hubName) \(name)", context: parent ?? ServiceContext.current ?? .topLevel, ofKind: .client)
        span.attributes["rpc.system"] = "signalr"
        span.attributes["server.address"] = url.host ?? ""
        return span
    }

    /// A consumer span for the handlers of an invocation from the server; its parent is the trace the invocation's
    /// headers carry, if any.
    nonisolated func handlerSpan(_ invocation: HubMessage.Invocation) -> any Span {
        let tracer = InstrumentationSystem.tracer
        var context = ServiceContext.topLevel
        if !invocation.headers.isEmpty { tracer.extract(invocation.headers, into: &context, using: HubHeaders()) }
        let span = tracer.startSpan("\(hubName)/\(invocation.target)", context: context, ofKind: .consumer)
        span.attributes["rpc.system"] = "signalr"
        span.attributes["rpc.service"] = hubName
        span.attributes["rpc.method"] = invocation.target
        return span
    }
}

extension Span {
    /// Ends the span with `error` recorded and the status set, or cleanly.
    func end(failing error: (any Error)?) {
        if let error {
            recordError(error)
            setStatus(SpanStatus(code: .error, message: (error as? HubConnectionError)?.message ?? "\(error)"))
        }
        end()
    }
}

/// A hub message's `headers` as the carrier of trace context, both ways.
struct HubHeaders: Injector, Extractor {
    func inject(_ value: String, forKey key: String, into headers: inout [String: String]) { headers[key] = value }
    func extract(key: String, from headers: [String: String]) -> String? { headers[key] }
}
