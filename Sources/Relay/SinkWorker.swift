import AllowanceAPI
import Foundation
import Logging
import Metrics
import Store
import Synchronization

/// Sends one sink's deliveries from the ledger, oldest first. One worker per sink, so a slow or dead sink never
/// delays the others. Every outcome is written back before the next send: a crash at any point leaves each
/// delivery pending (sent again with the same id) or finished, never lost.
struct SinkWorker: Sendable {
    let sink: any Sink
    let store: Store
    let config: RelayConfig
    let wakeup: Wakeup
    /// Set for a graceful stop or a reload: the send in progress finishes, no other starts.
    let stop: StopFlag
    let logger: Logger
    let rateLimiter: RateLimiter
    let metrics: DeliveryMetrics

    init(sink: any Sink, store: Store, config: RelayConfig, wakeup: Wakeup, stop: StopFlag, logger: Logger) {
        self.sink = sink
        self.store = store
        self.config = config
        self.wakeup = wakeup
        self.stop = stop
        self.logger = logger
        self.rateLimiter = RateLimiter(sink.config.rateLimit)
        self.metrics = DeliveryMetrics(sink: sink.config.name)
    }

    private var ending: Bool { Task.isCancelled || stop.isSet }

    var name: String { sink.config.name }

    func run() async {
        var pausedUntil = Date.distantPast
        var unavailable: String?
        while !ending {
            do {
                if let reason = try store.disabledSinks()[name] {
                    logger.debug("sink \(name) is disabled (\(reason)); waiting for `allowance-relay deliveries enable \(name)`")
                    await wakeup.wait(upTo: .seconds(60))
                    continue
                }
                let now = Date()
                if pausedUntil > now {
                    await wakeup.wait(upTo: .seconds(pausedUntil.timeIntervalSince(now)))
                    continue
                }
                let due = try store.dueDeliveries(sink: name, limit: 1000)
                if due.isEmpty {
                    // Also a look once a minute: `deliveries retry|enable` in another process cannot wake us.
                    let next = try store.nextDeliveryDue(sink: name).map { max(0.01, $0.timeIntervalSinceNow) } ?? 60
                    await wakeup.wait(upTo: .seconds(min(next, 60)))
                    continue
                }
                let markup = await sink.supportsMarkup()
                for delivery in try fold(due) {
                    if ending { return }
                    if let pause = try await deliver(delivery, markup: markup, unavailable: &unavailable) {
                        pausedUntil = pause
                        break
                    }
                }
            } catch {
                logger.error("sink \(name): \(error)")
                await wakeup.wait(upTo: .seconds(5))
            }
        }
    }

    /// One delivery. Returns when the whole sink should pause (the destination is down or throttling us).
    private func deliver(_ d: Delivery, markup: Bool, unavailable: inout String?) async throws -> Date? {
        if Date().timeIntervalSince(d.createdAt) > sink.config.maxAge {
            try store.deliveryDead(d.id, reason: "too old: still undelivered after \(Int(sink.config.maxAge / 3600)) h (\(d.lastError ?? "no answer"))")
            logger.error("sink \(name): gave up \(d.kind.rawValue) \(d.id): older than max_age_hours")
            return nil
        }
        await rateLimiter.wait()
        if ending { return nil }
        try store.deliveryInFlight(d.id)
        let outcome = await sink.send(render(d, markup: markup))
        // Cut short by the stop deadline: the row stays in flight and the engine puts it back to pending.
        if Task.isCancelled { return nil }
        let now = Date()  // waits the server asks for count from its answer
        let attempts = d.attempts + 1
        metrics.record(outcome)
        switch outcome {
        case .delivered:
            try store.deliveryDone(d.id)
            metrics.latency.recordInterval(since: d.createdAt, now: now)
            if unavailable != nil {
                logger.notice("sink \(name) works again")
                unavailable = nil
            }
            logger.info("delivered \(d.kind.rawValue) to \(name)", metadata: ["delivery": "\(d.id)"])
            return nil
        case .retry(let reason, let after):
            let retry = now.addingTimeInterval(after ?? backoff(attempts))
            try store.deliveryRetry(d.id, error: reason, at: retry)
            logger.warning("sink \(name): \(reason); retrying at \(ISO8601DateFormatter().string(from: retry))")
            return retry
        case .throttled(let reason, let after):
            let retry = now.addingTimeInterval(after ?? backoff(attempts))
            try store.deliveryRetry(d.id, error: reason, at: retry)
            logger.warning("sink \(name): \(reason); the sink waits until \(ISO8601DateFormatter().string(from: retry))")
            return retry
        case .disable(let reason):
            try store.deliveryRetry(d.id, error: reason, at: now)
            try store.disableSink(name, reason: reason)
            try store.raise(RelayEvent(kind: .deliveryDisabled, at: now, detail: reason, sink: name))
            logger.error("sink \(name) switched off: \(reason). Fix its config, then: allowance-relay deliveries enable \(name)")
            return now
        case .rejected(let reason):
            try store.deliveryDead(d.id, reason: reason)
            logger.error("sink \(name) refused \(d.kind.rawValue) \(d.id): \(reason) (dead letter; `allowance-relay deliveries retry \(d.id)`)")
            return nil
        case .unavailable(let reason):
            let retry = now.addingTimeInterval(60)
            try store.deliveryRetry(d.id, error: reason, at: retry)
            if unavailable == nil { logger.error("sink \(name) is unavailable: \(reason); the other sinks carry on, this one retries every minute") }
            unavailable = reason
            return retry
        }
    }

    /// Exponential with jitter: about 2 s, 4 s, 8 s ... up to the sink's `retry_max_seconds` (10 minutes).
    private func backoff(_ attempts: Int) -> TimeInterval {
        min(sink.config.retryMax, pow(2, Double(min(attempts, 20)))) * Double.random(in: 0.8...1.0)
    }

    /// Caught-up (or quiet-hours) transactions of one child become one digest message. Once one of them is due,
    /// the child's others due within the gathering time come along.
    private func fold(_ due: [Delivery]) throws -> [Delivery] {
        func foldable(_ d: Delivery) -> Bool { d.digest && d.kind == .transactionCreated && d.childId != nil }
        var out = due.filter { !foldable($0) }
        let children = Set(due.filter(foldable).compactMap(\.childId))
        for child in children {
            let parts = try store.foldableDeliveries(sink: name, child: child, dueBy: Date().addingTimeInterval(5))
            guard parts.count >= 2 else {
                out += parts
                continue
            }
            let sorted = parts.sorted { ($0.event.transaction?.createdAt ?? $0.createdAt) < ($1.event.transaction?.createdAt ?? $1.createdAt) }
            let total = sorted.reduce(Decimal(0)) { sum, d in
                guard let t = d.event.transaction else { return sum }
                return t.type == .credit ? sum + t.amount : sum - t.amount
            }
            let caughtUp = sorted.contains { $0.event.caughtUp }
            let digest = RelayEvent(
                kind: .digest, at: Date(), childId: child, childName: sorted.last?.event.childName,
                balance: sorted.last?.event.transaction?.balanceAfter, caughtUp: caughtUp,
                detail: caughtUp ? "While the relay was offline" : "During quiet hours", count: sorted.count, total: total,
                transactions: sorted.compactMap(\.event.transaction))
            out.append(try store.foldIntoDigest(sorted, digest: digest))
            logger.info("sink \(name): \(sorted.count) transactions of \(digest.childName ?? "a child") folded into one digest")
        }
        return out.sorted { $0.createdAt < $1.createdAt }
    }

    func render(_ d: Delivery, markup: Bool) -> Message {
        config.message(id: d.id, kind: d.kind, urgency: d.urgency, event: d.event, sink: sink.config, markup: markup)
    }
}

/// Deliveries by outcome and the time from planned to delivered, per sink (exported on /metrics).
struct DeliveryMetrics: Sendable {
    let outcomes: [String: Counter]
    let latency: Metrics.Timer

    static let outcomeNames = ["delivered", "retry", "throttled", "disabled", "rejected", "unavailable"]

    init(sink: String) {
        outcomes = Dictionary(uniqueKeysWithValues: Self.outcomeNames.map {
            ($0, Counter(label: "allowance_relay_deliveries_total", dimensions: [("sink", sink), ("outcome", $0)]))
        })
        latency = Metrics.Timer(label: "allowance_relay_delivery_latency_seconds", dimensions: [("sink", sink)], preferredDisplayUnit: .seconds)
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
