import Core
import Foundation
import HTTPTransport
import Logging
import TestSupport
import Testing
import Tracing

@testable import Telemetry

/// W3C Trace Context's `traceparent`, as the recommendation reads it (its examples and its rules for invalid values).
@Suite struct TraceParentTests {
    @Test func readsAndWritesTheRecommendationsExample() throws {
        let text = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
        let id = try #require(SpanIdentity(traceparent: text))
        #expect(id.traceID == "4bf92f3577b34da6a3ce929d0e0e4736")
        #expect(id.spanID == 0x00f0_67aa_0ba9_02b7)
        #expect(id.sampled)
        #expect(id.traceparent == text)
        #expect(SpanIdentity(traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00")?.sampled == false)
    }

    @Test(arguments: [
        "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",  // version ff is invalid
        "00-00000000000000000000000000000000-00f067aa0ba902b7-01",  // all-zero trace id
        "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",  // all-zero parent id
        "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",  // upper-case hex
        "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",  // a digit short
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",  // version 00 has nothing after the flags
        "00_4bf92f3577b34da6a3ce929d0e0e4736_00f067aa0ba902b7_01",
        "",
    ])
    func refusesWhatTheRecommendationCallsInvalid(_ text: String) {
        #expect(SpanIdentity(traceparent: text) == nil)
    }

    @Test func aLaterVersionIsReadUpToTheFlags() {
        let id = SpanIdentity(
            traceparent: "cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-what-the-future-holds")
        #expect(id?.traceID == "4bf92f3577b34da6a3ce929d0e0e4736")
    }
}

@Suite struct OTLPTracerTests {
    func exporter(_ environment: [String: String] = [:]) -> OTLPExporter {
        OTLPExporter(
            .init(
                endpoint: URL(string: "http://127.0.0.1:9")!, serviceName: "tests", serviceVersion: "0",
                environment: environment),
            http: HTTPClient(), logger: Logger(label: "tests"))
    }

    struct Headers: Injector, Extractor {
        func inject(_ value: String, forKey key: String, into carrier: inout [String: String]) { carrier[key] = value }
        func extract(key: String, from carrier: [String: String]) -> String? { carrier[key] }
    }

    @Test func childrenShareTheTraceAndTheHeadersCarryIt() throws {
        let exporter = exporter()
        let tracer = OTLPTracer(exporter: exporter)
        let root = tracer.startSpan("root", context: .topLevel, ofKind: .consumer)
        let child = tracer.startSpan("child", context: root.context, ofKind: .producer)
        var headers: [String: String] = [:]
        tracer.inject(child.context, into: &headers, using: Headers())
        child.end()
        root.end()
        let ended = exporter.takeQueued().spans
        #expect(ended.map(\.name) == ["child", "root"])
        #expect(ended[0].identity.traceID == ended[1].identity.traceID)
        #expect(ended[0].parentSpanID == ended[1].identity.spanID)
        #expect(ended[1].parentSpanID == nil)
        #expect(headers["traceparent"] == ended[0].identity.traceparent)
    }

    @Test func aRemoteParentIsContinuedWithItsTraceStateAndSampling() throws {
        let exporter = exporter()
        let tracer = OTLPTracer(exporter: exporter)
        var context = ServiceContext.topLevel
        tracer.extract(
            [
                "traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
                "tracestate": "congo=t61rcWkgMzE",
            ],
            into: &context, using: Headers())
        tracer.startSpan("continued", context: context, ofKind: .server).end()
        let span = try #require(exporter.takeQueued().spans.first)
        #expect(span.identity.traceID == "4bf92f3577b34da6a3ce929d0e0e4736")
        #expect(span.parentSpanID == 0x00f0_67aa_0ba9_02b7)
        #expect(span.identity.traceState == "congo=t61rcWkgMzE")

        // A parent the caller did not sample: nothing is recorded, and the decision is passed on.
        var unsampled = ServiceContext.topLevel
        tracer.extract(
            ["traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"], into: &unsampled,
            using: Headers())
        let quiet = tracer.startSpan("quiet", context: unsampled, ofKind: .server)
        #expect(!quiet.isRecording)
        var headers: [String: String] = [:]
        tracer.inject(quiet.context, into: &headers, using: Headers())
        quiet.end()
        #expect(exporter.takeQueued().spans.isEmpty)
        #expect(headers["traceparent"]?.hasSuffix("-00") == true)
    }

    @Test func aFullQueueDropsAndCounts() {
        let exporter = exporter(["OTEL_BSP_MAX_QUEUE_SIZE": "3"])
        let tracer = OTLPTracer(exporter: exporter)
        for i in 0..<5 { tracer.startSpan("s\(i)", context: .topLevel, ofKind: .internal).end() }
        // Spans started while the queue is full are not recorded at all, but still carry a context downstream.
        let late = tracer.startSpan("late", context: .topLevel, ofKind: .internal)
        #expect(!late.isRecording)
        #expect(late.context.spanIdentity != nil)
        late.end()
        let (spans, dropped) = exporter.takeQueued()
        #expect(spans.map(\.name) == ["s0", "s1", "s2"])
        #expect(dropped == 3)
    }

    @Test func theEnvironmentOfTheSpecificationApplies() {
        let c = OTLPExporter.Configuration(
            endpoint: URL(string: "https://collector.example:4318/")!, serviceName: "relay", serviceVersion: "1",
            environment: [
                "OTEL_EXPORTER_OTLP_HEADERS": "api-key=abc%20def,tenant=family",
                "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT": "2500",
                "OTEL_BSP_SCHEDULE_DELAY": "250", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "oops",
                "OTEL_RESOURCE_ATTRIBUTES": "deployment.environment=home,service.name=ignored",
            ])
        #expect(c.tracesURL.absoluteString == "https://collector.example:4318/v1/traces")
        #expect(c.headers.map { "\($0.0)=\($0.1)" } == ["api-key=abc def", "tenant=family"])
        #expect(c.timeout == .milliseconds(2500))
        #expect(c.scheduleDelay == .milliseconds(250))
        #expect(c.maxExportBatchSize == 512, "an unreadable value keeps the default")
        #expect(c.ignored == ["OTEL_BSP_MAX_EXPORT_BATCH_SIZE"])
        #expect(c.resource.contains { $0.0 == "deployment.environment" })
        #expect(c.resource.filter { $0.0 == "service.name" }.count == 1, "the configured name wins")
        // A URL that names the path already is taken as it is.
        let exact = OTLPExporter.Configuration(
            endpoint: URL(string: "http://127.0.0.1:4318/custom/v1/traces")!, serviceName: "relay", serviceVersion: "1",
            environment: [:])
        #expect(exact.tracesURL.absoluteString == "http://127.0.0.1:4318/custom/v1/traces")
    }
}

/// The export request as the OpenTelemetry project's own protobuf definitions read it (Python's opentelemetry-proto):
/// an encoder written here is checked against a decoder no one here wrote.
@Suite(.enabled(if: PythonPeer.available, "needs .venv with opentelemetry-proto: make test creates it"))
struct OTLPProtobufTests {
    @Test func opentelemetryProtoReadsEveryField() async throws {
        let exporter = OTLPExporter(
            .init(
                endpoint: URL(string: "http://127.0.0.1:9")!, serviceName: "relay-tests", serviceVersion: "9.9",
                environment: [:]),
            http: HTTPClient(), logger: Logger(label: "tests"))
        let tracer = OTLPTracer(exporter: exporter)
        var context = ServiceContext.topLevel
        context.spanIdentity = SpanIdentity(traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
        context.spanIdentity?.traceState = "congo=t61rcWkgMzE"
        let span = tracer.startSpan(
            "deliver audit", context: context, ofKind: .producer,
            at: DefaultTracerClock.Instant(nanosecondsSinceEpoch: 1_700_000_000_000_000_123))
        span.attributes["text"] = "Lego ✓"
        span.attributes["count"] = 42
        span.attributes["negative"] = -7
        span.attributes["ratio"] = 0.25
        span.attributes["flag"] = true
        span.attributes["names"] = ["a", "b"]
        struct Refused: Error, CustomStringConvertible { var description: String { "the webhook answered 500" } }
        span.recordError(Refused())
        span.setStatus(SpanStatus(code: .error, message: "the webhook answered 500"))
        span.end(at: DefaultTracerClock.Instant(nanosecondsSinceEpoch: 1_700_000_000_500_000_000))
        let batch = exporter.takeQueued().spans
        let hex = exporter.requestBody(batch).map { String(format: "%02x", $0) }.joined()
        let (status, output) = try await PythonPeer.run(script: "otlp_receiver.py", arguments: ["--decode"], input: hex)
        try #require(status == 0, "\(output)")
        let decoded = try JSONValue(parsing: Array(output.utf8))
        let s = try #require(decoded["spans"]?.arrayValue?.first)
        #expect(s["trace_id"] == "4bf92f3577b34da6a3ce929d0e0e4736")
        #expect(s["parent_span_id"] == "00f067aa0ba902b7")
        #expect(s["span_id"]?.stringValue == String(format: "%016llx", batch[0].identity.spanID))
        #expect(s["name"] == "deliver audit")
        #expect(s["kind"] == "SPAN_KIND_PRODUCER")
        #expect(s["start"] == 1_700_000_000_000_000_123)
        #expect(s["end"] == 1_700_000_000_500_000_000)
        #expect(s["trace_state"] == "congo=t61rcWkgMzE")
        #expect(s["flags"] == 1)
        #expect(s["attributes"]?["text"] == "Lego ✓")
        #expect(s["attributes"]?["count"] == 42)
        #expect(s["attributes"]?["negative"] == -7)
        #expect(s["attributes"]?["ratio"] == JSONValue.number("0.25"))
        #expect(s["attributes"]?["flag"] == true)
        #expect(s["attributes"]?["names"] == ["a", "b"])
        #expect(s["status"] == "STATUS_CODE_ERROR")
        #expect(s["status_message"] == "the webhook answered 500")
        #expect(s["events"]?.arrayValue?.first?["name"] == "exception")
        #expect(s["events"]?.arrayValue?.first?["attributes"]?["exception.message"] == "the webhook answered 500")
        #expect(decoded["resource"]?.arrayValue?.first?["service.name"] == "relay-tests")
        #expect(decoded["resource"]?.arrayValue?.first?["service.version"] == "9.9")
    }
}
