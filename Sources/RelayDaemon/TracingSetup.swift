import Config
import Foundation
import HTTPTransport
import Logging
import Relay
import Synchronization
import Telemetry
import Tracing

/// Traces, when `telemetry.otlp_endpoint` is set: the relay's OTLP tracer becomes the process's, and its exporter
/// runs in the daemon's group. The `OTEL_*` variables of the OpenTelemetry specification apply on top
/// (`OTEL_EXPORTER_OTLP_HEADERS` for a collector's token, `OTEL_BSP_SCHEDULE_DELAY`...).
///
/// What is traced: each hub connection attempt with its negotiate, each invocation, each hub event stored (a
/// consumer span `process TransactionCreated`) and each catch-up; the deliveries they plan keep the span's
/// `traceparent`, and each attempt to send one is a span in that trace (`deliver SINK`), whatever restart lies
/// between. The generic webhook carries the attempt's `traceparent` to its receiver.
enum TracingSetup {
    /// The process's tracer can be set once: a second daemon in the same process (tests) traces through the first's.
    private static let bootstrapped = Mutex(false)

    /// The exporter to run, after making its tracer the process's; nil when tracing is off or already set up.
    static func exporter(_ settings: RelaySettings, http: HTTPClient, logger: Logger) -> OTLPExporter? {
        guard let endpoint = settings.otlpEndpoint else { return nil }
        let configuration = OTLPExporter.Configuration(
            endpoint: endpoint, serviceName: settings.serviceName, serviceVersion: RelayInfo.version,
            environment: ProcessInfo.processInfo.environment)
        for name in configuration.ignored {
            logger.warning("tracing: \(name) is not what the OpenTelemetry specification allows: left out")
        }
        let exporter = OTLPExporter(configuration, http: http, logger: logger)
        let installed = bootstrapped.withLock { done -> Bool in
            guard !done else { return false }
            InstrumentationSystem.bootstrap(OTLPTracer(exporter: exporter))
            done = true
            return true
        }
        guard installed else { return nil }
        logger.info("tracing: spans go to \(configuration.tracesURL.redactedForLogs)")
        return exporter
    }
}
