import Config
import Foundation
import Logging
import OTel
import ServiceLifecycle
import Synchronization
import Tracing

/// Traces, when `telemetry.otlp_endpoint` is set: swift-otel's tracer becomes the process's, and its exporter (a
/// Service: batches spans, sends them by OTLP/HTTP with protobuf, flushes at the stop) runs in the daemon's group.
/// The `OTEL_*` variables of the OpenTelemetry specification apply on top (`OTEL_EXPORTER_OTLP_HEADERS` for a
/// collector's token, `OTEL_TRACES_SAMPLER`, `OTEL_BSP_SCHEDULE_DELAY`...).
///
/// What is traced: each hub connection attempt with its negotiate, each invocation, each hub event stored (a
/// consumer span `process TransactionCreated`) and each catch-up; the deliveries they plan keep the span's
/// `traceparent`, and each attempt to send one is a span in that trace (`deliver SINK`), whatever restart lies
/// between. The generic webhook carries the send's `traceparent` to its receiver.
enum Telemetry {
    /// The process's tracer can be set once: a second daemon in the same process (tests) traces through the first's.
    private static let bootstrapped = Mutex(false)

    /// The exporter to run, after making the tracer the process's; nil when tracing is off or already set up.
    static func exporter(_ settings: RelaySettings, logger: Logger) throws -> (any Service)? {
        guard let endpoint = settings.otlpEndpoint else { return nil }
        var config = OTel.Configuration.default
        config.serviceName = settings.serviceName
        config.diagnosticLogger = .custom(Logger(label: "otel"))
        config.diagnosticLogLevel = .warning
        config.metrics.enabled = false
        config.logs.enabled = false
        config.traces.exporter = .otlp
        config.traces.otlpExporter.protocol = .httpProtobuf
        config.traces.otlpExporter.endpoint = tracesURL(endpoint)
        let made = try bootstrapped.withLock { done -> (any Service)? in
            guard !done else { return nil }
            let backend = try OTel.makeTracingBackend(configuration: config)
            InstrumentationSystem.bootstrap(backend.factory)
            done = true
            return backend.service
        }
        if made != nil { logger.info("tracing: spans go to \(tracesURL(endpoint))") }
        return made
    }

    /// OTLP/HTTP's rule for a base URL (`OTEL_EXPORTER_OTLP_ENDPOINT`): traces go to `v1/traces` under it; a URL
    /// that already names that path is taken as it is.
    static func tracesURL(_ endpoint: URL) -> String {
        let text = endpoint.absoluteString
        if endpoint.path().hasSuffix("/v1/traces") { return text }
        return text.hasSuffix("/") ? text + "v1/traces" : text + "/v1/traces"
    }
}
