import Core
import Foundation
import HTTPTransport
import Logging
import ServiceLifecycle
import Synchronization
import Tracing

/// Sends ended spans to an OpenTelemetry collector by OTLP/HTTP (protobuf), in batches: every `scheduleDelay`, and
/// once more at the stop (it is a Service: run it in the group, first, so that it stops last). A queue of at most
/// `maxQueueSize` spans waits between batches; past it spans are dropped and counted, never the relay held back. A
/// batch the collector refuses or cannot take is dropped, said once until exports work again.
public final class OTLPExporter: Service, Sendable {
    public struct Configuration: Sendable {
        /// Where traces go (the `/v1/traces` URL).
        public var tracesURL: URL
        /// The process, as the spans' resource: `service.name` first.
        public var resource: [(String, SpanAttribute)]
        public var headers: [(String, String)] = []
        public var scheduleDelay: Duration = .seconds(5)
        public var maxQueueSize = 2048
        public var maxExportBatchSize = 512
        public var timeout: Duration = .seconds(10)
        public var trust: HTTPRequest.Trust = .system
        /// The `OTEL_*` variables that were set but could not be read (they were left out).
        public private(set) var ignored: [String] = []

        /// From the collector's base URL (traces go to `v1/traces` under it, as `OTEL_EXPORTER_OTLP_ENDPOINT` says,
        /// unless it already names that path), with the OpenTelemetry specification's variables on top:
        /// `OTEL_EXPORTER_OTLP_[TRACES_]HEADERS`, `_TIMEOUT` and `_CERTIFICATE`, `OTEL_BSP_SCHEDULE_DELAY`,
        /// `OTEL_BSP_MAX_QUEUE_SIZE`, `OTEL_BSP_MAX_EXPORT_BATCH_SIZE` and `OTEL_RESOURCE_ATTRIBUTES`.
        public init(endpoint: URL, serviceName: String, serviceVersion: String, environment: [String: String]) {
            tracesURL = Self.tracesURL(endpoint)
            resource = [
                ("service.name", .string(serviceName)), ("service.version", .string(serviceVersion)),
                ("process.pid", .int64(Int64(ProcessInfo.processInfo.processIdentifier))),
                ("telemetry.sdk.name", .string("allowance-relay")), ("telemetry.sdk.language", .string("swift")),
            ]
            func variable(_ name: String) -> (name: String, value: String)? {
                for n in [name.replacingOccurrences(of: "OTLP_", with: "OTLP_TRACES_"), name] {
                    if let v = environment[n], !v.isEmpty { return (n, v) }
                }
                return nil
            }
            if let (name, list) = variable("OTEL_EXPORTER_OTLP_HEADERS") {
                if let pairs = Self.pairs(list) { headers = pairs } else { ignored.append(name) }
            }
            if let (name, text) = variable("OTEL_EXPORTER_OTLP_TIMEOUT") {
                if let ms = Int(text), ms > 0 { timeout = .milliseconds(ms) } else { ignored.append(name) }
            }
            if let (_, file) = variable("OTEL_EXPORTER_OTLP_CERTIFICATE") { trust = .caFile(file) }
            func positive(_ name: String) -> Int? {
                guard let text = environment[name], !text.isEmpty else { return nil }
                guard let n = Int(text), n > 0 else {
                    ignored.append(name)
                    return nil
                }
                return n
            }
            if let ms = positive("OTEL_BSP_SCHEDULE_DELAY") { scheduleDelay = .milliseconds(ms) }
            if let n = positive("OTEL_BSP_MAX_QUEUE_SIZE") { maxQueueSize = n }
            if let n = positive("OTEL_BSP_MAX_EXPORT_BATCH_SIZE") { maxExportBatchSize = n }
            if let text = environment["OTEL_RESOURCE_ATTRIBUTES"], !text.isEmpty {
                if let pairs = Self.pairs(text) {
                    let named = Set(resource.map(\.0))
                    resource += pairs.filter { !named.contains($0.0) }.map { ($0.0, .string($0.1)) }
                } else {
                    ignored.append("OTEL_RESOURCE_ATTRIBUTES")
                }
            }
        }

        static func tracesURL(_ endpoint: URL) -> URL {
            if endpoint.path().hasSuffix("/v1/traces") { return endpoint }
            let text = endpoint.absoluteString
            return URL(string: text.hasSuffix("/") ? text + "v1/traces" : text + "/v1/traces") ?? endpoint
        }

        /// `key1=value1,key2=value2`, values percent-decoded (the specification's W3C Baggage-like list).
        static func pairs(_ list: String) -> [(String, String)]? {
            var out: [(String, String)] = []
            for item in list.split(separator: ",") {
                let parts = item.split(separator: "=", maxSplits: 1)
                guard parts.count == 2,
                    let value = String(parts[1]).trimmingCharacters(in: .whitespaces).removingPercentEncoding
                else { return nil }
                let key = parts[0].trimmingCharacters(in: .whitespaces)
                guard !key.isEmpty else { return nil }
                out.append((key, value))
            }
            return out
        }
    }

    public let configuration: Configuration
    private let http: HTTPClient
    private let logger: Logger
    private let queue = Mutex<(spans: [FinishedSpan], dropped: Int)>(([], 0))
    private let failing = Mutex(false)

    public init(_ configuration: Configuration, http: HTTPClient, logger: Logger) {
        self.configuration = configuration
        self.http = http
        self.logger = logger
    }

    /// Whether a span started now may be kept: false (and counted as dropped) while the queue is full.
    func admits() -> Bool {
        queue.withLock { q in
            guard q.spans.count < configuration.maxQueueSize else {
                q.dropped += 1
                return false
            }
            return true
        }
    }

    func add(_ span: FinishedSpan) {
        queue.withLock { q in
            if q.spans.count < configuration.maxQueueSize { q.spans.append(span) } else { q.dropped += 1 }
        }
    }

    public func run() async throws {
        while true {
            try? await cancelWhenGracefulShutdown { try await Task.sleep(for: self.configuration.scheduleDelay) }
            if Task.isShuttingDownGracefully || Task.isCancelled { break }
            await exportQueued()
        }
        // What the others' last moments made, in little time: a collector that does not answer must not hold the
        // stop past the daemon's grace period.
        await exportQueued(timeout: min(configuration.timeout, .seconds(2)))
    }

    /// Sends what waits, a batch at a time.
    func exportQueued(timeout: Duration? = nil) async {
        let (spans, dropped) = takeQueued()
        if dropped > 0 {
            logger.warning(
                "tracing: \(dropped) span(s) dropped: more than \(configuration.maxQueueSize) waited for the next export (OTEL_BSP_MAX_QUEUE_SIZE)"
            )
        }
        var start = spans.startIndex
        while start < spans.endIndex {
            let end = min(start + configuration.maxExportBatchSize, spans.endIndex)
            await send(Array(spans[start..<end]), timeout: timeout ?? configuration.timeout)
            start = end
        }
    }

    /// The spans waiting, and how many were dropped since the last call; the queue is empty afterwards.
    func takeQueued() -> (spans: [FinishedSpan], dropped: Int) {
        queue.withLock { q in
            defer { q = ([], 0) }
            return q
        }
    }

    /// An export request's body.
    func requestBody(_ batch: [FinishedSpan]) -> [UInt8] {
        OTLPProtobuf.request(resource: configuration.resource, scope: ("allowance-relay", "1"), spans: batch)
    }

    private func send(_ batch: [FinishedSpan], timeout: Duration) async {
        let body = requestBody(batch)
        var request = HTTPRequest(
            .post, configuration.tracesURL, body: body, timeout: timeout, maxResponseBytes: 64 << 10,
            trust: configuration.trust)
        request[header: "Content-Type"] = "application/x-protobuf"
        for (name, value) in configuration.headers { request[header: name] = value }
        let problem: String?
        do {
            let answer = try await http.send(request)
            problem = (200..<300).contains(answer.status) ? nil : "the collector answered \(answer.status)"
        } catch {
            problem = error.message
        }
        let wasFailing = failing.withLock { f in
            defer { f = problem != nil }
            return f
        }
        // The URL's query and credentials are left out: a collector's token may be there.
        let url = configuration.tracesURL.redactedForLogs
        if let problem, !wasFailing {
            logger.warning(
                "tracing: \(batch.count) span(s) not exported to \(url): \(problem) (said once until exports work again)"
            )
        } else if problem == nil, wasFailing {
            logger.notice("tracing: exports to \(url) work again")
        }
    }
}
