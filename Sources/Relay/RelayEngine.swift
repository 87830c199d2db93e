import Alerts
import AllowanceAPI
import Config
import Core
import Foundation
import HTTPTransport
import Logging
import StoreContract
import Synchronization

/// The relay: installs the rules into the store (so deliveries are planned in the same transaction as their event),
/// runs a worker per sink, and raises `connection.lost` when the hub stays away too long. The same on either store:
/// the SQLite file of a single relay, or the PostgreSQL database replicas share.
///
/// `reload` swaps rules, templates and sinks while running: the old workers finish the sends they are in, the
/// new ones take over the ledger. `stop` is the graceful end: no new sends, the ones under way may finish; one
/// cancelled past the deadline leaves its delivery pending (nothing is written before a send).
public final class RelayEngine: Sendable {
    let store: any RelayStore
    /// Where the rules' deliveries are taken and settled: the store's own ledger unless a test stands in.
    let ledger: any DeliveryLedger
    /// This machine's popups (per machine by nature, in the local file even where the rest is shared).
    let popups: (any PopupIds)?
    let http: HTTPClient
    let logger: Logger
    /// "Mute today" from popups, honoured by the rules of every generation.
    let mutes: MuteList
    private let state: Mutex<State>
    /// Signalled when the generation changes or the engine stops, for a `run` that has no workers to wait on.
    private let changed = Wakeup()
    private let lostTimer = Mutex<Task<Void, Never>?>(nil)
    /// How the engine waits out `connectionLostAfter`: the real clock, or a test's hand-driven one.
    private let sleep: @Sendable (Duration) async -> Void

    private struct State {
        var current: Generation
        var stopped = false
    }

    /// One config's workers, the flag that ends them, and the summary scheduler's wake-up (a stop or a reload ends
    /// its sleep).
    private struct Generation: Sendable {
        let config: AlertSettings
        let workers: [SinkWorker]
        let stop: StopFlag
        let summaries = Wakeup()

        func end() {
            stop.set()
            for w in workers { w.wakeup.signal() }
            summaries.signal()
        }
    }

    /// `popups`: where desktop sinks keep this machine's popup ids; `ledger`: where the workers take deliveries and
    /// record outcomes, when not the store's own (a test's failing ledger); `sleep`: how `connectionLostAfter` is
    /// waited out (a test drives it by hand).
    public init(
        store: any RelayStore, popups: (any PopupIds)? = nil, config: AlertSettings, http: HTTPClient = .shared,
        ledger: (any DeliveryLedger)? = nil, logger: Logger,
        sleep: @escaping @Sendable (Duration) async -> Void = { try? await Task.sleep(for: $0) }
    ) {
        self.sleep = sleep
        self.store = store
        self.ledger = ledger ?? store
        self.popups = popups
        self.http = http
        self.logger = logger
        let mutes = MuteList(store: store)
        self.mutes = mutes
        state = Mutex(
            State(
                current: Self.generation(
                    config, store: store, popups: popups, ledger: ledger ?? store, http: http, mutes: mutes,
                    logger: logger)))
    }

    private static func generation(
        _ config: AlertSettings, store: any RelayStore, popups: (any PopupIds)?, ledger: any DeliveryLedger,
        http: HTTPClient, mutes: MuteList, logger: Logger
    ) -> Generation {
        let stop = StopFlag()
        let workers = config.sinks.map {
            SinkWorker(
                sink: makeSink(
                    $0, memory: store, popups: popups, http: http, formatting: config.formatting, mutes: mutes),
                ledger: ledger,
                config: config,
                wakeup: Wakeup(), handOver: HandOver(), stop: stop, logger: logger)
        }
        return Generation(config: config, workers: workers, stop: stop)
    }

    public var config: AlertSettings { state.withLock { $0.current.config } }

    /// Every sink's worker waits with everything due started, nothing under way and every outcome written. With no
    /// row pending in the ledger either, nothing more can be sent until something new is planned: a test that has
    /// seen what it expected waits for this instead of sleeping before it asserts that nothing came twice.
    public var sinksAreSettled: Bool { state.withLock { $0.current.workers }.allSatisfy(\.isSettled) }

    /// From now on every stored event plans its deliveries. Call before the first event can arrive.
    public func install() throws(StoreError) {
        plan(with: state.withLock { $0.current })
        // A database from before deliveries stopped recording in_flight may hold such rows: they go again, same ids.
        let requeued = try store.requeueInFlightDeliveries()
        if requeued > 0 {
            logger.notice("\(requeued) deliveries were in flight at the last stop: sending them again (same ids)")
        }
    }

    private func plan(with generation: Generation) {
        let workers = Dictionary(generation.workers.map { ($0.name, $0) }, uniquingKeysWith: { a, _ in a })
        let config = generation.config
        for warning in Routing(config).warnings { logger.warning("\(warning)") }
        store.setOrderedSinks(Set(config.sinks.filter(\.ordersByChild).map(\.name)))
        let planner = RulePlanner(
            rules: config.rules, sinks: config.sinksByName, currency: config.formatting.currency, mutes: mutes,
            history: config.history)
        @Sendable func handOver(_ rows: [Delivery], to sink: String) {
            guard let worker = workers[sink] else { return }
            worker.handOver.put(rows)
            worker.wakeup.signal()
        }
        store.setPlanner(planner) { planned in
            // Only the sinks that got work are woken, each with its rows. Most often every row is for one sink: they
            // go as they are, not copied into groups (a blast's commit plans hundreds; BENCHMARKS.md, session 56).
            if let sink = planned.first?.sink, planned.allSatisfy({ $0.sink == sink }) {
                handOver(planned, to: sink)
            } else {
                for (sink, rows) in Dictionary(grouping: planned, by: \.sink) { handOver(rows, to: sink) }
            }
        }
    }

    /// Takes a new config: events stored from now on are planned by its rules, and its workers replace the old
    /// ones once those have finished their current send. Deliveries already planned keep their sink by name.
    public func reload(_ config: AlertSettings) -> ReloadSummary {
        let new = Self.generation(
            config, store: store, popups: popups, ledger: ledger, http: http, mutes: mutes, logger: logger)
        let old = state.withLock { s in
            defer { s.current = new }
            return s.current
        }
        plan(with: new)
        replanHeld(config)
        old.end()
        changed.signal()
        let before = Set(old.config.sinks.map(\.name))
        let after = Set(config.sinks.map(\.name))
        let pending = (try? store.owedDeliveryCounts()) ?? [:]
        let orphaned = before.subtracting(after).sorted().compactMap { name -> (String, Int)? in
            let n = Delivery.State.waiting.reduce(0) { $0 + (pending[name]?[$1.rawValue] ?? 0) }
            return n > 0 ? (name, n) : nil
        }
        return ReloadSummary(
            added: after.subtracting(before).sorted(), removed: before.subtracting(after).sorted(),
            kept: after.intersection(before).sorted(), rules: config.rules.count, orphaned: orphaned)
    }

    /// Runs the sink workers until `stop()` (or cancellation). A send cut short leaves its delivery pending in the
    /// ledger (nothing is written before a send), so nothing is owed to a send that never finished.
    public func run() async {
        while let generation = state.withLock({ $0.stopped ? nil : $0.current }) {
            if generation.workers.isEmpty {
                await changed.wait(upTo: .seconds(3600))
            } else {
                let names = generation.workers.map { "\($0.name) (\($0.sinkConfig.kind.rawValue))" }
                logger.info("relaying to \(generation.workers.count) sink(s): \(names.joined(separator: ", "))")
                let summaries = SummaryScheduler(
                    store: store, config: generation.config, stop: generation.stop, wakeup: generation.summaries,
                    logger: logger)
                await withDiscardingTaskGroup { group in
                    for w in generation.workers { group.addTask { await w.run() } }
                    group.addTask { await summaries.run() }
                }
            }
            if Task.isCancelled { break }
        }
    }

    /// Graceful stop: each worker finishes the send it is in and takes no other.
    public func stop() {
        let current = state.withLock { s in
            s.stopped = true
            return s.current
        }
        current.end()
        changed.signal()
    }

    /// Deliveries may be waiting that no planner of this process handed over (another replica planned them, or
    /// gave its claims back): every worker looks at the ledger.
    public func wakeWorkers() {
        for w in state.withLock({ $0.current.workers }) { w.lookAtTheLedger() }
    }

    /// Another process asked for the waiting alerts now (`deliveries retry`, `deliveries enable`): each sink ends its
    /// back-off and looks at its ledger.
    public func retryAsked() {
        for w in state.withLock({ $0.current.workers }) { w.retryAsked() }
    }

    /// The hub link is down: if it stays down for `connectionLostAfter`, raise `connection.lost` once.
    public func linkLost(_ reason: String) {
        let after = config.connectionLostAfter
        let ledger = self.ledger
        let (logger, sleep) = (self.logger, self.sleep)
        lostTimer.withLock { timer in
            guard timer == nil else { return }
            timer = Task {
                await sleep(.seconds(after))
                guard !Task.isCancelled else { return }
                do {
                    try ledger.raise(
                        RelayEvent(
                            kind: .connectionLost, at: Date(),
                            detail:
                                "no connection for \(after >= 120 ? "\(Int(after / 60)) minutes" : "\(Int(after)) seconds"): \(reason)"
                        ))
                } catch {
                    logger.error("could not record connection.lost: \(error)")
                }
            }
        }
    }

    /// Another process changed the mutes (`allowance-relay mute`, which signals SIGUSR1): alerts planned from now on
    /// follow them.
    public func mutesChanged() {
        let running = mutes.refresh()
        logger.notice("mutes read again: \(running) running")
        replanHeld(state.withLock { $0.current.config })
    }

    /// Alerts held for quiet hours follow the quiet hours and mutes in force now: a reload that shortens them
    /// releases what they held, a mute set meanwhile keeps its child's held alerts from going out.
    private func replanHeld(_ config: AlertSettings) {
        let now = Date()
        let planner = RulePlanner(rules: config.rules, sinks: config.sinksByName, mutes: mutes)
        do {
            // Held for longer than a catch-up's digest gathers (seconds): quiet hours.
            let changes = planner.replan(try store.heldDeliveries(dueAfter: now.addingTimeInterval(30)), now: now)
            guard !changes.isEmpty else { return }
            try store.replanHeld(changes)
            let muted = changes.filter { if case .muted = $0.change { true } else { false } }.count
            logger.notice(
                "\(changes.count) held alert(s) planned again for the quiet hours and mutes in force (\(muted) muted)")
            for w in state.withLock({ $0.current.workers }) { w.lookAtTheLedger() }
        } catch {
            logger.error("could not plan the held alerts again: \(error)")
        }
    }

    /// A catch-up finished: the sinks that show the family (Home Assistant's device) publish any child added or deleted.
    public func familyChanged() {
        let workers = state.withLock { $0.current.workers }
        Task { for w in workers { await w.sink.familyChanged() } }
    }

    public func linkRestored() {
        lostTimer.withLock { timer in
            timer?.cancel()
            timer = nil
        }
    }
}

extension AlertSettings {
    /// One test alert sent straight to `sink` (not through the ledger), for `notify test`.
    public func sendTest(to sink: SinkConfig, http: HTTPClient = .shared) async -> DeliveryOutcome {
        let s = makeSink(sink, http: http, formatting: formatting)
        let event = RelayEvent(kind: .test, at: Date(), sink: sink.name)
        let id = "test_" + UUID.random().lowercased
        let outcome = await s.send(
            message(id: id, kind: .test, urgency: .normal, event: event, sink: sink, markup: await s.supportsMarkup()))
        await s.close()
        return outcome
    }

    /// An alert rendered for `sink`: the title as written, the text with each value escaped for the destination.
    /// `alert`: the stored alert, when there is one (else it is written from `event`).
    public func message(
        id: String, kind: RelayEvent.Kind, urgency: PlannedDelivery.Urgency, event: RelayEvent, alert: String? = nil,
        sink: SinkConfig,
        markup: Bool
    ) -> Message {
        let (title, text) = templates(for: kind, sink: sink)
        // Text from the server is made printable (no control or bidi characters) before each destination's escaping.
        let values = formatting.values(event, kind: kind, sink: sink.name).mapValues(SafeText.printable)
        let rendered = (title: title.render(values), text: text.render(values) { sink.escape($0, markup: markup) })
        let link = formatting.link(for: event, template: sink.link)
        guard let alert else {
            return Message(
                id: id, kind: kind, urgency: urgency, title: rendered.title, text: rendered.text, event: event,
                currency: formatting.currency, link: link)
        }
        return Message(
            id: id, kind: kind, urgency: urgency, title: rendered.title, text: rendered.text, childId: event.childId,
            alert: alert, event: event,
            link: link)
    }
}

/// What a reload changed, for the log line and `--json`.
public struct ReloadSummary: Sendable {
    public let added: [String]
    public let removed: [String]
    public let kept: [String]
    public let rules: Int
    /// Removed sinks that still have deliveries waiting: they stay in the ledger until the sink comes back.
    public let orphaned: [(sink: String, pending: Int)]

    public var description: String {
        var parts = ["\(kept.count + added.count) sink(s), \(rules) rule(s)"]
        if !added.isEmpty { parts.append("added \(added.joined(separator: ", "))") }
        if !removed.isEmpty { parts.append("removed \(removed.joined(separator: ", "))") }
        for (sink, n) in orphaned {
            parts.append(
                "\(n) delivery(ies) for the removed sink \(sink) wait until a sink of that name is configured again")
        }
        return parts.joined(separator: "; ")
    }
}
