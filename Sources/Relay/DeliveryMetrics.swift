import Foundation
import Metrics
import Synchronization

/// Deliveries by outcome and the time from planned to delivered, per sink (exported on /metrics).
struct DeliveryMetrics: Sendable {
    let outcomes: [String: Counter]
    let latency: Metrics.Timer
    /// 1 while the sink fails (from its first failed send to the next one that goes through).
    let failing: Gauge

    static let outcomeNames = ["delivered", "retry", "throttled", "disabled", "rejected", "unavailable"]

    init(sink: String) {
        outcomes = Dictionary(
            uniqueKeysWithValues: Self.outcomeNames.map {
                ($0, Counter(label: "allowance_relay_deliveries_total", dimensions: [("sink", sink), ("outcome", $0)]))
            })
        failing = Gauge(label: "allowance_relay_sink_failing", dimensions: [("sink", sink)])
        latency = Metrics.Timer(
            label: "allowance_relay_delivery_latency_seconds", dimensions: [("sink", sink)],
            preferredDisplayUnit: .seconds)
    }

    func record(_ outcome: DeliveryOutcome) {
        let name =
            switch outcome {
            case .delivered: "delivered"
            case .retry: "retry"
            case .throttled: "throttled"
            case .disable: "disabled"
            case .rejected: "rejected"
            case .unavailable: "unavailable"
            }
        outcomes[name]?.increment()
    }
}

extension Metrics.Timer {
    func recordInterval(since start: Date, now: Date) {
        recordNanoseconds(Int64(max(0, now.timeIntervalSince(start)) * 1e9))
    }
}

/// Spaces sends evenly: at most `count` per `seconds` (e.g. Slack's one per second per channel).
final class RateLimiter: Sendable {
    private let interval: Duration
    private let next = Mutex(ContinuousClock.now)

    init(_ limit: (count: Int, seconds: Double)?) {
        interval = limit.map { .seconds($0.seconds / Double($0.count)) } ?? .zero
    }

    func wait() async {
        guard interval > .zero else { return }
        let slot = next.withLock { n -> ContinuousClock.Instant in
            let slot = max(n, .now)
            n = slot + interval
            return slot
        }
        try? await Task.sleep(until: slot)
    }
}
