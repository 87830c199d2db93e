import Core
import Foundation
import TestSupport
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// `telemetry.otlp_endpoint`: the real binary exports its spans by OTLP/HTTP to a collector no one here wrote the
/// decoding of (the OpenTelemetry project's protobuf definitions, `Tests/Interop/otlp_receiver.py`). One trace runs
/// from the hub event to each attempt to deliver it, and on to the webhook's receiver.
@Suite(
    .serialized, .timeLimit(.minutes(2)),
    .enabled(if: PythonPeer.available, "needs .venv with opentelemetry-proto: make test creates it"))
struct TracingEndToEndTests {
    struct Span: Sendable {
        let json: JSONValue
        var traceId: String { json["trace_id"]?.stringValue ?? "" }
        var spanId: String { json["span_id"]?.stringValue ?? "" }
        var parent: String { json["parent_span_id"]?.stringValue ?? "" }
        var name: String { json["name"]?.stringValue ?? "" }
        var status: String { json["status"]?.stringValue ?? "" }
        func attribute(_ key: String) -> JSONValue? { json["attributes"]?[key] }
    }

    func spans(_ collector: URL) async throws -> [Span] {
        let (data, _) = try await TestHTTP.data(from: collector.appending(path: "spans"))
        guard case .array(let all) = try JSONValue(parsing: data) else { return [] }
        return all.map(Span.init)
    }

    /// The relay with tracing to `collector` (batches every 100 ms, not every 5 s) and one webhook sink, `audit`, for
    /// each transaction; `telemetry` and `sink` add a line to their sections.
    func startRelay(
        _ base: URL, collector: URL, hook: URL, telemetry: String = "", sink: String = ""
    ) throws -> RelayProcess {
        let dir = FileManager.default.temporaryDirectory.appending(path: "relay-tracing-\(UUID())")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let config = dir.appending(path: "relay.yaml").path
        try """
        telemetry:
          otlp_endpoint: \(collector.absoluteString)
          \(telemetry)
        sinks:
          audit:
            type: webhook
            url: \(hook.absoluteString)/allowance
            \(sink)
        rules:
          - name: each transaction
            event: transaction.created
            to: [audit]
            digest: false
        """.write(toFile: config, atomically: true, encoding: .utf8)
        return try RelayProcess(
            env: [
                "ALLOWANCE_RELAY_SERVER_URL": base.absoluteString, "ALLOWANCE_RELAY_SERVER_TOKEN": "e2e-token",
                "OTEL_BSP_SCHEDULE_DELAY": "100",
            ],
            arguments: ["run", "--config", config])
    }

    @Test func oneTraceFromTheHubEventToEachDeliveryAttemptAndOnToTheReceiver() async throws {
        let collectorPeer = try await PythonPeer(script: "otlp_receiver.py")
        defer { collectorPeer.stop() }
        let collector = URL(string: "http://127.0.0.1:\(collectorPeer.address)")!
        // The first delivery fails (500), the retry goes through: two attempts, two spans in the event's trace.
        let hook = WebhookReceiver { _, n in WebhookReceiver.Answer(n == 0 ? 500 : 200) }
        try await hook.run { hookURL in
            try await withSim { base in
                let relay = try startRelay(
                    base, collector: collector, hook: hookURL, telemetry: "service_name: relay-under-test",
                    sink: "retry_max_seconds: 1")
                #expect(await relay.waitFor("caught up"))
                #expect(relay.output.contains("tracing: spans go to \(collector.absoluteString)/v1/traces"))
                try await simPost(base, "/_sim/burst?count=1")
                #expect(await eventually { hook.acknowledged.count == 1 }, "\(relay.output.suffix(2000))")
                let delivered = try #require(hook.acknowledged.first)
                let transaction = try #require(Scenario.transactionId(of: delivered))

                var found: [Span] = []
                #expect(
                    try await eventually {
                        found = try await spans(collector)
                        return found.filter { $0.name == "deliver audit" }.count == 2
                    }, "spans: \(found.map(\.name))")
                let event = try #require(
                    found.first {
                        $0.name == "process TransactionCreated"
                            && $0.attribute("allowance.transaction.id")?.stringValue == transaction
                    })
                #expect(event.json["kind"] == "SPAN_KIND_CONSUMER")
                #expect(event.json["service"] == "relay-under-test")
                #expect(event.attribute("messaging.system") == "signalr")
                #expect(event.attribute("allowance.stored") == "stored")
                // Both attempts are children of the event's span, in its trace; the failed one says why.
                let attempts = found.filter { $0.name == "deliver audit" }.sorted {
                    $0.attribute("allowance.delivery.attempt")?.intValue ?? 0 < $1.attribute(
                        "allowance.delivery.attempt")?.intValue ?? 0
                }
                #expect(attempts.allSatisfy { $0.traceId == event.traceId && $0.parent == event.spanId })
                #expect(attempts.map { $0.attribute("allowance.delivery.attempt")?.intValue } == [1, 2])
                #expect(attempts.map(\.status) == ["STATUS_CODE_ERROR", "STATUS_CODE_UNSET"])
                #expect(attempts[0].json["status_message"]?.stringValue?.contains("500") == true)
                #expect(attempts.map { $0.attribute("allowance.outcome") } == ["retry", "delivered"])
                #expect(
                    attempts.allSatisfy {
                        $0.attribute("allowance.delivery.id")?.stringValue == delivered.headers["webhook-id"]
                    })
                // The receiver got the delivering attempt's context, as W3C Trace Context.
                #expect(delivered.headers["traceparent"] == "00-\(event.traceId)-\(attempts[1].spanId)-01")
                // The hub link's own spans: the connection attempt, with negotiate inside it.
                let connect = try #require(found.first { $0.name == "family connect" })
                #expect(
                    found.contains {
                        $0.name == "family negotiate" && $0.parent == connect.spanId && $0.traceId == connect.traceId
                    })
                #expect(found.contains { $0.name == "catch-up" })
                await relay.expectCleanStop()
                #expect(!relay.output.contains("e2e-token"))
            }
        }
    }

    /// A collector that is down costs one log line, not an alert, and the stop stays prompt and clean.
    @Test func aCollectorThatIsDownCostsOneLogLineNotTheAlerts() async throws {
        let hook = WebhookReceiver()
        try await hook.run { hookURL in
            try await withSim { base in
                let relay = try startRelay(base, collector: URL(string: "http://127.0.0.1:9")!, hook: hookURL)
                #expect(await relay.waitFor("caught up"))
                for _ in 0..<3 {
                    try await simPost(base, "/_sim/burst?count=1")
                    try await Task.sleep(for: .milliseconds(300))  // an export between each
                }
                #expect(await eventually { hook.acknowledged.count == 3 }, "\(relay.output.suffix(2000))")
                #expect(
                    relay.output.components(separatedBy: "not exported to http://127.0.0.1:9/v1/traces").count - 1 == 1,
                    "\(relay.output)")
                let stopping = ContinuousClock.now
                await relay.expectCleanStop()
                #expect(ContinuousClock.now - stopping < .seconds(8))
            }
        }
    }

    @Test func aBrokenEndpointIsRefusedAtLoad() async throws {
        let dir = FileManager.default.temporaryDirectory.appending(path: "relay-tracing-\(UUID())")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let config = dir.appending(path: "relay.yaml").path
        try "telemetry:\n  otlp_endpoint: grpc://user:secret@collector:4317\n".write(
            toFile: config, atomically: true, encoding: .utf8)
        let relay = try RelayProcess(
            env: ["ALLOWANCE_RELAY_SERVER_URL": "http://127.0.0.1:9", "ALLOWANCE_RELAY_SERVER_TOKEN": "e2e-token"],
            arguments: ["run", "--config", config])
        #expect(await relay.wait() == 78)
        #expect(relay.output.contains("telemetry.otlp_endpoint"))
        #expect(relay.output.contains("is not an http:// or https:// URL"))
        #expect(!relay.output.contains("secret"), "a password in the URL is not echoed")
    }
}
