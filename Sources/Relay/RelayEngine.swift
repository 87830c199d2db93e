import AllowanceAPI
import Foundation
import Logging
import Store
import Synchronization

/// The relay: installs the rules into the store (so deliveries are planned in the same SQLite transaction as
/// their event), runs a worker per sink, and raises `connection.lost` when the hub stays away too long.
public final class RelayEngine: Sendable {
    public let config: RelayConfig
    let store: Store
    let workers: [SinkWorker]
    let logger: Logger
    private let lostTimer = Mutex<Task<Void, Never>?>(nil)

    public init(store: Store, config: RelayConfig, logger: Logger) {
        self.store = store
        self.config = config
        self.logger = logger
        workers = config.sinks.map { SinkWorker(sink: makeSink($0), store: store, config: config, wakeup: Wakeup(), logger: logger) }
    }

    /// From now on every stored event plans its deliveries. Call before the first event can arrive.
    public func install() throws(StoreError) {
        let wakeups = workers.map(\.wakeup)
        store.setPlanner(RulePlanner(rules: config.rules, sinks: config.sinksByName)) {
            for w in wakeups { w.signal() }
        }
        let requeued = try store.requeueInFlightDeliveries()
        if requeued > 0 { logger.notice("\(requeued) deliveries were in flight at the last stop: sending them again (same ids)") }
    }

    /// Runs the sink workers until the task is cancelled.
    public func run() async {
        guard !workers.isEmpty else { return }
        logger.info("relaying to \(workers.count) sink(s): \(workers.map { "\($0.name) (\($0.sink.config.kind.rawValue))" }.joined(separator: ", "))")
        await withDiscardingTaskGroup { group in
            for w in workers { group.addTask { await w.run() } }
        }
    }

    /// The hub link is down: if it stays down for `connectionLostAfter`, raise `connection.lost` once.
    public func linkLost(_ reason: String) {
        let after = config.connectionLostAfter
        let store = self.store
        let logger = self.logger
        lostTimer.withLock { timer in
            guard timer == nil else { return }
            timer = Task {
                try? await Task.sleep(for: .seconds(after))
                guard !Task.isCancelled else { return }
                do {
                    try store.raise(RelayEvent(kind: .connectionLost, at: Date(), detail: "no connection for \(after >= 120 ? "\(Int(after / 60)) minutes" : "\(Int(after)) seconds"): \(reason)"))
                } catch {
                    logger.error("could not record connection.lost: \(error)")
                }
            }
        }
    }

    public func linkRestored() {
        lostTimer.withLock { timer in
            timer?.cancel()
            timer = nil
        }
    }
}

extension RelayConfig {
    /// One test alert sent straight to `sink` (not through the ledger), for `notify test`.
    public func sendTest(to sink: SinkConfig) async -> DeliveryOutcome {
        let s = makeSink(sink)
        let event = RelayEvent(kind: .test, at: Date(), sink: sink.name)
        let id = "test_" + UUID().uuidString.lowercased()
        return await s.send(message(id: id, kind: .test, urgency: .normal, event: event, sink: sink, markup: await s.supportsMarkup()))
    }

    /// An alert rendered for `sink`: the title as written, the text with each value escaped for the destination.
    public func message(
        id: String, kind: RelayEvent.Kind, urgency: PlannedDelivery.Urgency, event: RelayEvent, sink: SinkConfig, markup: Bool
    ) -> Message {
        let (title, text) = templates(for: kind, sink: sink)
        let values = formatting.values(event, kind: kind, sink: sink.name)
        return Message(
            id: id, kind: kind, urgency: urgency, title: title.render(values), text: text.render(values) { sink.escape($0, markup: markup) },
            event: event)
    }
}
