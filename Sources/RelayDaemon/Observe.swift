import AllowanceAPI
import Config
import Core
import Foundation
import Logging
import Metrics
import Prometheus
import ServiceLifecycle
import Store
import StoreContract
import Synchronization

/// The hub link as the daemon sees it: set by the hub service, read by /healthz and /metrics, and persisted on
/// each change for `status` (another process).
final class LinkMonitor: Sendable {
    private let state = Mutex(LinkStatus(state: .connecting, detail: "starting"))
    let store: any StatusSource
    let logger: Logger

    init(store: any StatusSource, logger: Logger) {
        self.store = store
        self.logger = logger
    }

    var current: LinkStatus { state.withLock { $0 } }

    func set(
        _ s: LinkStatus.State, connectionId: String? = nil, transport: String? = nil, hubProtocol: String? = nil,
        detail: String
    ) {
        var status = LinkStatus(state: s, connectionId: connectionId, detail: detail)
        status.transport = transport
        status.hubProtocol = hubProtocol
        state.withLock { $0 = status }
        do {
            try store.setLinkStatus(status)
        } catch {
            logger.warning("could not record the hub link state for `status`: \(error)")
        }
    }
}

/// Metrics in Prometheus text format. The modules count with swift-metrics (deliveries, catch-up); the
/// daemon counts hub events and reconnects, and reads the gauges from the database when scraped.
public final class RelayMetrics: Sendable {
    let registry = PrometheusCollectorRegistry()
    let reconnects: Metrics.Counter
    /// One counter per hub method, found by the event's case for every event (not by hashing its name).
    private let transactionsCreated: Metrics.Counter
    private let balancesUpdated: Metrics.Counter
    /// Every sink whose delivery gauges were set: set again at each scrape (0 once nothing is owed), never left at a
    /// count that is gone.
    private let gaugedSinks = Mutex<Set<String>>([])

    /// Bootstraps swift-metrics onto this registry (once a process, before any module makes a metric; an
    /// in-process test that runs a daemon next to others passes false).
    public init(bootstrap: Bool = true) {
        var factory = PrometheusMetricsFactory(registry: registry)
        factory.durationHistogramBuckets["allowance_relay_delivery_latency_seconds"] = [
            .milliseconds(5), .milliseconds(10), .milliseconds(25), .milliseconds(50), .milliseconds(100),
            .milliseconds(250),
            .milliseconds(500), .seconds(1), .seconds(2.5), .seconds(5), .seconds(10), .seconds(30), .seconds(60),
            .seconds(300),
            .seconds(1800),
        ]
        if bootstrap { MetricsSystem.bootstrap(factory) }
        reconnects = Metrics.Counter(label: "allowance_relay_hub_reconnects_total")
        func events(_ target: String) -> Metrics.Counter {
            Metrics.Counter(label: "allowance_relay_hub_events_total", dimensions: [("type", target)])
        }
        transactionsCreated = events(HubEvent.transactionCreatedTarget)
        balancesUpdated = events(HubEvent.balanceUpdatedTarget)
    }

    func hubEvent(_ event: HubEvent) {
        switch event {
        case .transactionCreated, .transactionCreatedId: transactionsCreated.increment()
        case .balanceUpdated: balancesUpdated.increment()
        }
    }

    /// The text exposition, with the gauges read now. `sinks`: the configured ones, gauged even with nothing owed.
    func scrape(store: any StatusSource & PlanningStore, link: LinkStatus, sinks: [String]) -> String {
        gauge("allowance_relay_hub_connected", "1 while the relay holds the hub link, else 0").set(
            to: link.state == .connected ? 1 : 0)
        if let waiting = try? store.outboxWaiting() {
            gauge("allowance_relay_outbox_depth", "Writes made here waiting to reach the server").set(
                to: Double(waiting))
        }
        if let bytes = try? store.storageBytes() {
            gauge("allowance_relay_database_bytes", "Size of the database and its log, in bytes").set(to: Double(bytes))
        }
        if let contact = try? store.contact() {
            if let last = contact.lastEvent {
                gauge("allowance_relay_last_event_age_seconds", "Seconds since the hub last sent an event").set(
                    to: max(0, Date().timeIntervalSince(last)))
            }
        }
        if let owed = try? store.owedDeliveryCounts() {
            let gauged = gaugedSinks.withLock {
                $0.formUnion(sinks)
                $0.formUnion(owed.keys)
                return $0
            }
            for sink in gauged {
                for state in Delivery.State.owed.map(\.rawValue) {
                    gauge(
                        "allowance_relay_deliveries", "Alerts owed to each sink, by state",
                        labels: [("sink", sink), ("state", state)]
                    )
                    .set(to: Double(owed[sink]?[state] ?? 0))
                }
            }
        }
        return registry.emitToString()
    }

    /// A gauge of the registry, with the help line a scraper shows beside it.
    private func gauge(_ name: String, _ help: String, labels: [(String, String)] = []) -> Prometheus.Gauge {
        registry.makeGauge(
            descriptor: MetricNameDescriptor(metricName: name, unitName: "", helpText: help), labels: labels)
    }
}

/// `status.listen`: GET / (the family page), GET /healthz (200, or 503 with the reasons) and GET /metrics. With a
/// token (`status.token_file`), the page and /metrics ask for it (Bearer, or Basic with it as the password, so that a
/// browser's login prompt works); /healthz stays open to the probes of a service manager or a container runtime.
struct StatusEndpoint {
    let host: String
    let port: Int
    let store: any RelayStorage
    let token: Secret?
    /// The relay's settings as they are now (a reload changes the sinks and the currency).
    let alerts: @Sendable () -> AlertSettings
    let link: LinkMonitor
    let metrics: RelayMetrics
    /// `status.unhealthy_after`.
    let unhealthyAfter: TimeInterval
    let logger: Logger

    var service: some Service {
        EndpointService(host: host, port: port, logger: logger, handle: handle)
    }

    /// The answer to one request.
    var handle: @Sendable (StatusServer.Request) -> StatusServer.Response {
        let (store, link, metrics, unhealthyAfter, token, alerts) = (
            store, link, metrics, unhealthyAfter, token, alerts
        )
        return { request in
            guard request.method == "GET" else {
                return .init(status: 405, contentType: "text/plain", body: "only GET\n")
            }
            if request.path != "/healthz", let token, !Self.authorized(request.authorization, token: token) {
                return .init(
                    status: 401, contentType: "text/plain", body: "the token of status.token_file is needed here\n",
                    headers: [("WWW-Authenticate", "Basic realm=\"allowance-relay\", charset=\"UTF-8\"")])
            }
            switch request.path {
            case "/":
                do {
                    let page = FamilyPage.html(try FamilyPage.view(store: store, config: alerts()))
                    return .init(status: 200, contentType: "text/html; charset=utf-8", body: page)
                } catch {
                    return .init(
                        status: 503, contentType: "text/plain", body: "the database cannot be read: \(error)\n")
                }
            case "/healthz":
                let (healthy, body) = Self.health(store: store, link: link.current, unhealthyAfter: unhealthyAfter)
                return .init(status: healthy ? 200 : 503, contentType: "application/json", body: body.serialized + "\n")
            case "/metrics":
                return .init(
                    status: 200, contentType: "text/plain; version=0.0.4; charset=utf-8",
                    body: metrics.scrape(store: store, link: link.current, sinks: alerts().sinks.map(\.name)))
            default:
                return .init(
                    status: 404, contentType: "text/plain",
                    body: "not found: the family page (/), /healthz and /metrics are served here\n")
            }
        }
    }

    /// Whether `header` carries the token: `Bearer TOKEN`, or `Basic` with any user and the token as the password.
    /// Compared in constant time.
    static func authorized(_ header: String?, token: Secret) -> Bool {
        guard let header else { return false }
        let parts = header.split(separator: " ", maxSplits: 1).map(String.init)
        guard parts.count == 2 else { return false }
        var given: String?
        switch parts[0].lowercased() {
        case "bearer": given = parts[1]
        case "basic":
            given = Data(base64Encoded: parts[1]).map { String(decoding: $0, as: UTF8.self) }.flatMap { pair in
                pair.firstIndex(of: ":").map { String(pair[pair.index(after: $0)...]) }
            }
        default: given = nil
        }
        guard let given else { return false }
        let (a, b) = (Array(given.utf8), Array(token.value.utf8))
        var difference = UInt8(a.count == b.count ? 0 : 1)
        for i in 0..<max(a.count, b.count) { difference |= (i < a.count ? a[i] : 0) ^ (i < b.count ? b[i] : 0) }
        return difference == 0
    }

    /// Healthy when the hub link is up (or, for a replica, held by another), the database answers, sync is not in
    /// error, no sink is switched off or dead-letters, and none has failed for `unhealthyAfter`.
    static func health(
        store: any StatusSource, link: LinkStatus, unhealthyAfter: TimeInterval, now: Date = Date()
    ) -> (Bool, JSONValue) {
        var reasons: [String] = []
        if link.state != .connected && link.state != .standby {
            reasons.append(
                "hub \(link.state.rawValue) since \(Date.ISO8601FormatStyle().format(link.since)): \(link.detail)")
        }
        do {
            if let sync = try store.syncStatus(), sync.phase == .error { reasons.append("sync error: \(sync.detail)") }
            for (sink, why) in try store.disabledSinks().sorted(by: { $0.key < $1.key }) {
                reasons.append("sink \(sink) switched off: \(why)")
            }
            for (sink, health) in try store.sinkHealth().sorted(by: { $0.key < $1.key }) {
                if let why = health.unhealthyReason(sink: sink, at: now, after: unhealthyAfter) { reasons.append(why) }
            }
        } catch {
            reasons.append("database: \(error)")
        }
        return (
            reasons.isEmpty,
            [
                "status": .string(reasons.isEmpty ? "ok" : "unhealthy"), "reasons": .array(reasons.map { .string($0) }),
                "hub": .string(link.state.rawValue), "connectionId": link.connectionId.map { .string($0) } ?? .null,
                "transport": link.transport.map { .string($0) } ?? .null,
                "protocol": link.hubProtocol.map { .string($0) } ?? .null,
            ]
        )
    }
}

/// Runs the endpoint until the daemon stops; a port that cannot be bound ends the daemon with a message naming
/// `status.listen`.
struct EndpointService: Service {
    let host: String
    let port: Int
    let logger: Logger
    let handle: @Sendable (StatusServer.Request) -> StatusServer.Response

    func run() async throws {
        let server: StatusServer
        do {
            server = try StatusServer(host: host, port: port)
        } catch {
            throw DaemonError(
                exitCode: 1,
                message: "status.listen \(host):\(port): cannot serve the family page, /healthz and /metrics: \(error)")
        }
        logger.info("status endpoint on http://\(host):\(port) (the family page at /, /healthz, /metrics)")
        // It answers until the very end of a graceful stop (the group stops it last), then ends with the group.
        await withGracefulShutdownHandler {
            await server.serve(handle)
        } onGracefulShutdown: {
            server.stop()
        }
    }
}
