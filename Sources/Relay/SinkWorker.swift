import Alerts
import AllowanceAPI
import Config
import Core
import Foundation
import Logging
import Metrics
import StoreContract
import Synchronization
import Tracing

/// Sends one sink's deliveries from the ledger, oldest first, up to `concurrency` at a time on kept-alive
/// connections. One worker per sink, so a slow or dead sink never delays the others.
///
/// Nothing is written before a send: a crash during it leaves the row pending, and the resend carries the same
/// id (receivers dedup on it). Outcomes are written in batches (group commit): while one batch commits, the next
/// gathers, so a busy sink pays one fsync for many alerts and an idle one waits for none. A slot is free again
/// only once its outcome is written, so a kill -9 sends at most `concurrency` alerts of a sink a second time.
/// After a failure the sink sends one probe at a time until one goes through: a destination that is down or
/// throttling is not met with `concurrency` requests per round. A chat sink sends one alert per child at a time,
/// in order; a retry or a throttle pauses the whole sink, so nothing overtakes an alert that waits.
///
/// A class: every send's task and the committer's hold the worker, one reference each, not a copy of its fields.
final class SinkWorker: Sendable {
    let sink: any Sink
    /// `sink.config`, kept: read through the protocol, each use copied the whole config (and released it after).
    let sinkConfig: SinkConfig
    /// The delivery queue (the store's ledger; another backend could stand in).
    let ledger: any DeliveryLedger
    let config: AlertSettings
    let wakeup: Wakeup
    /// The rows the planner has just committed for this sink (each comes with a `wakeup` signal).
    let handOver: HandOver
    /// Set for a graceful stop or a reload: the sends in progress finish, no other starts.
    let stop: StopFlag
    let logger: Logger
    let rateLimiter: RateLimiter
    let metrics: DeliveryMetrics
    /// The sends under way, their outcomes, and the sink's pause and failure.
    let sends = SendsInProgress()

    init(
        sink: any Sink, ledger: any DeliveryLedger, config: AlertSettings, wakeup: Wakeup, handOver: HandOver,
        stop: StopFlag, logger: Logger
    ) {
        self.sink = sink
        self.sinkConfig = sink.config
        self.ledger = ledger
        self.config = config
        self.wakeup = wakeup
        self.handOver = handOver
        self.stop = stop
        self.logger = logger
        self.rateLimiter = RateLimiter(sinkConfig.rateLimit)
        self.metrics = DeliveryMetrics(sink: sinkConfig.name)
    }

    private var ending: Bool { Task.isCancelled || stop.isSet }

    /// A person asked for the waiting alerts now (`deliveries retry`, `deliveries enable`): the back-off after a
    /// failure ends and the worker looks at the ledger.
    func retryAsked() {
        sends.endBackOff()
        lookAtTheLedger()
    }

    /// Rows changed in the ledger behind the worker's back (a retry, a re-plan): its next look reads them there.
    func lookAtTheLedger() {
        handOver.forget()
        wakeup.signal()
    }

    var name: String { sinkConfig.name }

    /// Parked in a wait nobody has signalled, nothing under way, every outcome written (`RelayEngine.sinksAreSettled`).
    var isSettled: Bool { sends.isSettled && wakeup.isParked }

    func run() async {
        await sink.start()
        // A sink that was failing when the relay stopped is failing until a send goes through.
        if let was = try? ledger.sinkHealth()[name] {
            sends.restore(was)
            metrics.failing.record(1)
        }
        let committed = Wakeup()
        sends.onFinish = { committed.signal() }
        await withDiscardingTaskGroup { group in
            group.addTask { await self.commitOutcomes(self.sends, wake: committed) }
            await dispatch(sends, group: &group)
            // No new sends: the ones under way finish (or are cancelled past the stop's deadline, leaving their rows
            // pending), then the committer writes what is left and ends.
            sends.close()
            committed.signal()
        }
        await sink.close()
        if sends.abandoned > 0 {
            logger.notice(
                "sink \(name): \(sends.abandoned) delivery(ies) cut short by the stop: pending again, sent at the next start (same ids)"
            )
        }
    }

    /// Waits on the worker's wakeup, saying meanwhile what kind of wait it is.
    /// Returns false when the timeout ended the wait.
    @discardableResult
    private func park(_ kind: SendsInProgress.Dispatcher, upTo timeout: Duration) async -> Bool {
        sends.dispatcher = kind
        let signalled = await wakeup.wait(upTo: timeout)
        sends.dispatcher = .working
        return signalled
    }

    /// Takes due deliveries and starts their sends while there is room: performs what `DispatchMachine` decides.
    private func dispatch(_ sends: SendsInProgress, group: inout DiscardingTaskGroup) async {
        var machine = DispatchMachine(ordersByChild: sinkConfig.ordersByChild, readLimit: batch)
        while !ending {
            do {
                let taken = sends.taken
                let inProgress = DispatchMachine.InProgress(ids: taken.ids, children: taken.children)
                // a failing destination: one probe
                let room = (sends.probing ? 1 : sinkConfig.concurrency) - taken.ids.count
                switch machine.step(
                    now: Date(), clock: .now, pausedUntil: sends.pausedUntil, room: room, inProgress: inProgress)
                {
                case .paused(let until):
                    await wakeup.wait(upTo: .seconds(max(0.001, until.timeIntervalSinceNow)))
                case .full:
                    await wakeup.wait(upTo: .seconds(60))  // a send's outcome, once written, signals
                case .drainedWait(let next):
                    machine.wokeFromDrainedWait(bySignal: await park(.drained, upTo: untilDue(next)))
                case .look(let readSwitchedOff):
                    // A 410 just switched the sink off: read its switch again now rather than within the minute.
                    let switchedOffRead: String?? =
                        sends.takeSwitchedOff() || readSwitchedOff ? .some(try ledger.disabledSinks()[name]) : nil
                    // Taken here, whatever comes next: it holds only what came since the last look. Emptied before the
                    // read: a row handed over from now on was either committed before the read (then the read has it)
                    // or is new.
                    let handedOver = handOver.take()
                    switch machine.looked(
                        switchedOffRead: switchedOffRead, at: .now, handedOver: handedOver, inProgress: inProgress,
                        now: Date())
                    {
                    case .switchedOff(let reason):
                        logger.debug(
                            "sink \(name) is disabled (\(reason)); waiting for `allowance-relay deliveries enable \(name)`"
                        )
                        await park(.waiting, upTo: .seconds(60))  // settled: nothing of a switched-off sink is due
                    case .handedOver:
                        break
                    case .readLedger:
                        let (due, next) = try ledger.dueDeliveriesAndNext(
                            sink: name, at: Date(), limit: machine.readLimit, excluding: taken.ids)
                        machine.read(
                            due: due, folded: try fold(try mergeSuperseded(due, sending: taken.ids)), next: next)
                    }
                case .wait(let until):
                    await park(.waiting, upTo: untilDue(until))
                case .start(let ready):
                    let markup = await sink.supportsMarkup()
                    for d in ready {
                        await rateLimiter.wait()
                        if ending || sends.isPaused {
                            machine.startInterrupted()
                            break
                        }
                        sends.start(d, child: DispatchMachine.childKey(d))
                        group.addTask {
                            if let result = await self.deliver(d, markup: markup, sends: sends) {
                                sends.finish(d.id, result)
                            } else {
                                sends.abandon(d.id)  // cut short by the stop: the row stays pending
                            }
                        }
                    }
                }
            } catch {
                logger.error("sink \(name): \(error)")
                machine.failed()
                await wakeup.wait(upTo: .seconds(5))
            }
        }
    }

    /// How many due rows one read takes. A rate-limited sink (a chat) reads a few at a time: what it read waits its
    /// turn in memory, where a newer balance cannot supersede it and a summary cannot pass it.
    private var batch: Int {
        sinkConfig.rateLimit == nil ? DispatchMachine.batch : max(4, 2 * sinkConfig.concurrency)
    }

    /// A sink read by people sends a child's balance once, as it is now: the waiting updates a newer one supersedes
    /// are merged into it (`Delivery.superseding`). A machine gets every update.
    private func mergeSuperseded(_ due: [Delivery], sending: Set<String>) throws -> [Delivery] {
        guard !sinkConfig.isMachine else { return due }
        var merged = Set<String>()
        for kind in Delivery.superseding {
            for child in Set(due.filter { $0.kind == kind }.compactMap(\.childId)) {
                merged.formUnion(try ledger.mergeSuperseded(sink: name, child: child, kind: kind, excluding: sending))
            }
        }
        guard !merged.isEmpty else { return due }
        logger.info("sink \(name): \(merged.count) superseded update(s) merged into the newest")
        return due.filter { !merged.contains($0.id) }
    }

    /// How long to sleep for a delivery due at `date` (nil: none waits): at most until the ledger's changes that no
    /// signal tells of are to be seen (`unsignalledChangesSeenWithin`).
    private func untilDue(_ date: Date?) -> Duration {
        let most = ledger.unsignalledChangesSeenWithin
        guard let date else { return most }
        return min(.seconds(max(0.01, date.timeIntervalSinceNow)), most)
    }

    /// One send. Returns the outcome to write, or nil when the stop cut it short (the row stays pending). A
    /// delivery planned with tracing on is a span in its event's trace, one per attempt.
    private func deliver(_ d: Delivery, markup: Bool, sends: SendsInProgress) async -> JobOutcome? {
        guard let parent = d.traceParent else {
            return await attempt(d, markup: markup, sends: sends, traceParent: nil)
        }
        let span = InstrumentationSystem.tracer.startSpan(
            "deliver \(name)", context: TraceParent.context(parent), ofKind: .producer)
        defer { span.end() }
        span.attributes["allowance.sink"] = name
        span.attributes["allowance.sink.kind"] = sinkConfig.kind.rawValue
        span.attributes["allowance.alert.kind"] = d.kind.rawValue
        span.attributes["allowance.delivery.id"] = d.id
        span.attributes["allowance.delivery.attempt"] = d.attempts + 1
        let outcome = await attempt(d, markup: markup, sends: sends, traceParent: TraceParent.of(span.context))
        switch outcome {
        case .done: span.attributes["allowance.outcome"] = "delivered"
        case .retry(let error, _):
            span.attributes["allowance.outcome"] = "retry"
            span.setStatus(SpanStatus(code: .error, message: error))
        case .gaveUp(let reason):
            span.attributes["allowance.outcome"] = "dead letter"
            span.setStatus(SpanStatus(code: .error, message: reason))
        case nil: span.attributes["allowance.outcome"] = "stopped"
        }
        return outcome
    }

    private func attempt(_ d: Delivery, markup: Bool, sends: SendsInProgress, traceParent: String?) async -> JobOutcome?
    {
        let started = Date()
        if started.timeIntervalSince(d.createdAt) > sinkConfig.maxAge {
            logger.error("sink \(name): gave up \(d.kind.rawValue) \(d.id): older than max_age_hours")
            failing(
                "alerts older than max_age_hours given up (\(d.lastError ?? "no answer"))", deadLetter: true, sends,
                at: started)
            return .gaveUp(
                reason:
                    "too old: still undelivered after \(Int(sinkConfig.maxAge / 3600)) h (\(d.lastError ?? "no answer"))"
            )
        }
        var message: Message
        do {
            message = try render(d, markup: markup)
            message.traceParent = traceParent
        } catch {
            logger.error("sink \(name): \(d.kind.rawValue) \(d.id) cannot be read: \(error) (dead letter)")
            return .gaveUp(reason: "unreadable alert: \(error)")
        }
        let outcome = await sink.send(message)
        if Task.isCancelled { return nil }
        let now = Date()  // waits the server asks for count from its answer
        metrics.record(outcome)
        switch outcome {
        case .delivered:
            metrics.latency.recordInterval(since: d.createdAt, now: now)
            if let was = sends.working() { recovered(from: was, at: now) }
            logger.info("delivered \(d.kind.rawValue) to \(name)", metadata: ["delivery": "\(d.id)"])
            return .done(at: now)
        case .retry(let reason, let after):
            let retry = now.addingTimeInterval(backoff.seconds(retry: d.attempts + 1, serverAsked: after))
            pause(until: retry, sends)
            failing(reason, deadLetter: false, sends, at: now)
            logger.warning("sink \(name): \(reason); retrying in \(spoken(seconds: retry.timeIntervalSince(now)))")
            return .retry(error: reason, at: retry)
        case .throttled(let reason, let after):
            let retry = now.addingTimeInterval(backoff.seconds(retry: d.attempts + 1, serverAsked: after))
            pause(until: retry, sends, throttled: true)
            logger.warning("sink \(name): \(reason); the sink waits \(spoken(seconds: retry.timeIntervalSince(now)))")
            return .retry(error: reason, at: retry)
        case .disable(let reason):
            sends.switchOff()
            do {
                try ledger.disableSink(name, reason: reason, at: now)
                try ledger.raise(RelayEvent(kind: .deliveryDisabled, at: now, detail: reason, sink: name))
            } catch {
                logger.error("sink \(name): could not record that it is switched off: \(error)")
            }
            logger.error(
                "sink \(name) switched off: \(reason). Fix its config, then: allowance-relay deliveries enable \(name)")
            return .retry(error: reason, at: now)
        case .rejected(let reason):
            failing(reason, deadLetter: true, sends, at: now)
            logger.error(
                "sink \(name) refused \(d.kind.rawValue) \(d.id): \(reason) (dead letter; `allowance-relay deliveries retry \(d.id)`)"
            )
            return .gaveUp(reason: reason)
        case .unavailable(let reason):
            let retry = now.addingTimeInterval(60)
            sends.pause(until: retry)
            failing(reason, deadLetter: false, sends, at: now)
            if sends.unavailable(reason) {
                logger.error(
                    "sink \(name) is unavailable: \(reason); the other sinks carry on, this one retries every minute")
            }
            return .retry(error: reason, at: retry)
        }
    }

    /// The destination asked to wait: this worker waits, and so does every relay sharing the ledger (a 429 learnt by
    /// one replica holds for all). Where the machine cannot reach the destination, only this one waits.
    private func pause(until date: Date, _ sends: SendsInProgress, throttled: Bool = false) {
        sends.pause(until: date, throttled: throttled)
        do { try ledger.pauseSink(name, until: date) } catch {
            logger.warning("sink \(name): could not share its pause with the other relays: \(error)")
        }
    }

    /// A failed send: the ledger learns that the sink fails, and since when (for `status`, `/healthz`, the replicas).
    private func failing(_ reason: String, deadLetter: Bool, _ sends: SendsInProgress, at now: Date) {
        metrics.failing.record(1)
        guard let health = sends.failed(reason, deadLetter: deadLetter, at: now) else { return }
        do { try ledger.setSinkHealth(name, health) } catch {
            logger.warning("sink \(name): could not record that it fails: \(error)")
        }
    }

    /// The first send through after failures: said once, and cleared in the ledger.
    private func recovered(from was: SinkHealth, at now: Date) {
        metrics.failing.record(0)
        logger.notice(
            "sink \(name) works again after \(spoken(seconds: now.timeIntervalSince(was.failingSince))) of failures (last: \(was.lastError))"
        )
        do { try ledger.setSinkHealth(name, nil) } catch {
            logger.warning("sink \(name): could not record that it works again: \(error)")
        }
    }

    /// About 2 s, 4 s, 8 s ... up to the sink's `retry_max_seconds` (10 minutes).
    private var backoff: Backoff { Backoff(initial: .seconds(2), maximum: .seconds(sinkConfig.retryMax)) }

    /// Caught-up (or quiet-hours) transactions of one child become one digest message. Once one of them is due,
    /// the child's others due within the gathering time come along.
    private func fold(_ due: [Delivery]) throws -> [Delivery] {
        var out = due.filter { !DispatchMachine.foldable($0) }
        let children = Set(due.filter(DispatchMachine.foldable).compactMap(\.childId))
        for child in children {
            let parts = try ledger.foldableDeliveries(sink: name, child: child, dueBy: Date().addingTimeInterval(5))
                .compactMap { d in
                    (try? d.event).map { (delivery: d, event: $0) }
                }
            guard parts.count >= 2 else {
                out += parts.map(\.delivery)
                continue
            }
            let sorted = parts.sorted {
                ($0.event.transaction?.createdAt ?? $0.delivery.createdAt)
                    < ($1.event.transaction?.createdAt ?? $1.delivery.createdAt)
            }
            let total = sorted.reduce(Decimal(0)) { sum, p in
                guard let t = p.event.transaction else { return sum }
                return t.type == .credit ? sum + t.amount : sum - t.amount
            }
            let caughtUp = sorted.contains { $0.event.caughtUp }
            let history = sorted.allSatisfy { $0.event.history }
            // What the digest folds, in words: the family's history, a time the relay was away (every part caught up),
            // or quiet hours (live transactions held; a catch-up after a short drop in the night does not make the
            // whole night "offline").
            let offline = sorted.allSatisfy { $0.event.caughtUp }
            let detail =
                history ? "Before the relay started" : offline ? "While the relay was offline" : "During quiet hours"
            // The balance as it is now: live transactions since the last folded one have moved it.
            let balance =
                (try? ledger.currentBalance(child: child)).flatMap { $0 }
                ?? sorted.last?.event.transaction?.balanceAfter
            var digest = RelayEvent(
                kind: .digest, at: Date(), childId: child, childName: sorted.last?.event.childName,
                balance: balance, caughtUp: caughtUp,
                detail: detail, count: sorted.count, total: total,
                transactions: sorted.compactMap(\.event.transaction))
            digest.history = history
            out.append(
                try ledger.foldIntoDigest(
                    sorted.map(\.delivery), digest: digest, currency: config.formatting.currency, at: Date()))
            logger.info(
                "sink \(name): \(sorted.count) transactions of \(digest.childName ?? "a child") folded into one digest")
        }
        return out.sorted(by: Delivery.sendingOrder)
    }

    /// The generic webhook forwards the stored alert; the other sinks fill their templates from it.
    func render(_ d: Delivery, markup: Bool) throws(APIError) -> Message {
        if sinkConfig.kind == .webhook {
            return Message(
                id: d.id, kind: d.kind, urgency: d.urgency, childId: d.childId, alert: d.alert, event: d.carried)
        }
        let event = try d.event
        var m = config.message(
            id: d.id, kind: d.kind, urgency: d.urgency, event: event, alert: d.alert, sink: sinkConfig, markup: markup)
        // A summary shows the child's period as a chart where the destination shows pictures; without one it is
        // the text alone (a chart that cannot be drawn is not a reason to hold the summary back).
        if d.kind == .summary, sinkConfig.showsPictures {
            do { m.image = try config.chart(for: event).png() } catch {
                logger.warning("sink \(name): the summary goes without its chart: \(error)")
            }
        }
        return m
    }
}
