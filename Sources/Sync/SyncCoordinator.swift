import Alerts
import AllowanceAPI
import Foundation
import Logging
import SignalRProtocol
import StoreContract
import Tracing

/// Keeps the cache whole: stores each hub event, and runs one catch-up at a time whenever the link was
/// (re)established or an event shows the cache missed something. Requests during a catch-up coalesce.
public actor SyncCoordinator {
    /// A catch-up that failed is tried again after 2, 4, 8 ... s, at most a minute apart.
    static let catchUpBackoff = Backoff(initial: .seconds(2), maximum: .seconds(60))

    /// When the outbox gives up on a write that keeps failing for a retryable reason (dead letter).
    public struct OutboxLimits: Sendable {
        public var maxAttempts: Int
        public var maxAge: TimeInterval
        public init(maxAttempts: Int = 10, maxAge: TimeInterval = 7 * 86400) {
            self.maxAttempts = maxAttempts
            self.maxAge = maxAge
        }
    }

    private let store: any SyncStore
    private let limits: OutboxLimits
    private let api: APIClient
    private let catchUp: CatchUp
    private let logger: Logger
    /// One catch-up at a time, a fetch and a drain never at once, nothing after a conflict: the decisions.
    private var machine = SyncMachine()
    /// The catch-up waits here for a drain to end before its fetch.
    private var drainEnded: [CheckedContinuation<Void, Never>] = []
    private var status: SyncStatus?
    /// Storing fails (a full disk, a lock): the first failure is logged, the same one again is counted until
    /// storing works, so a burst against a full disk is two lines, not two per batch.
    private var storeFailure: (message: String, since: Date, events: Int)?
    private var statusWriteFailing = false
    /// Set when the server's data contradicted the cache (another server, or one reset or restored): from then on
    /// nothing is stored, caught up or sent, so that two servers' data are never mixed. `run --rebuild` starts over.
    private var conflict: String? { machine.conflict }
    /// Catch-ups start at least this far apart: a hub that drops and takes the link back again and again gets
    /// one catch-up for a run of reconnects, not one each (requests meanwhile coalesce into the next).
    private let catchUpSpacing: Duration
    private var lastCatchUpStart: ContinuousClock.Instant?
    /// Told after each completed catch-up (the family as the server lists it is in the cache).
    private var caughtUp: (@Sendable () -> Void)?
    /// The children's wish lists, read after each catch-up and when a balance moves (`run()` it beside the link).
    public nonisolated let wishLists: WishListRefresh
    /// Each hub event stored, and each catch-up, is a span whose trace the deliveries it plans continue.
    private let tracing: Bool
    /// Where the catch-ups run (nil: the global pool): a thread of its own keeps their blocking database calls off
    /// the cooperative pool.
    private let executor: (any TaskExecutor)?

    /// `action` runs after each completed catch-up.
    public func onCaughtUp(_ action: @escaping @Sendable () -> Void) {
        caughtUp = action
    }

    /// `tracing`: spans through the process's tracer (bootstrapped by the caller) for every event and catch-up.
    public init(
        store: any SyncStore, api: APIClient, limits: OutboxLimits = OutboxLimits(),
        catchUpSpacing: Duration = .seconds(3), tracing: Bool = false,
        wishListSpacing: Duration = .seconds(5), wishListEvery: Duration = .seconds(1800),
        executor: (any TaskExecutor)? = nil, logger: Logger
    ) {
        self.wishLists = WishListRefresh(
            store: store, api: api, spacing: wishListSpacing, every: wishListEvery, logger: logger)
        self.executor = executor
        self.store = store
        self.tracing = tracing
        self.catchUpSpacing = catchUpSpacing
        self.limits = limits
        self.api = api
        self.catchUp = CatchUp(store: store, api: api, logger: logger)
        self.logger = logger
    }

    public func handle(_ event: HubEvent) {
        handle([event])
    }

    /// Stores a burst of hub events in one SQLite transaction, and starts one catch-up if any of them shows the
    /// cache missed something.
    public func handle(_ events: [HubEvent]) {
        guard conflict == nil else {
            logger.debug("not stored, the cache conflicts with the server: \(events.count) event(s)")
            return
        }
        var catchUpReason: String?
        let spans = tracing ? events.map(Self.eventSpan) : []
        defer { for span in spans { span.end() } }
        do {
            let results = try store.apply(events, at: Date(), traceParents: spans.map { TraceParent.of($0.context) })
            for (span, result) in zip(spans, results) { span.attributes["allowance.stored"] = result.outcome }
            var moved = Set<UUID>()
            for (event, result) in zip(events, results) {
                if case .stored = result, let child = event.movesBalanceOf { moved.insert(child) }
                switch result {
                case .stored(gap: nil): break
                case .stored(gap: let child?):
                    catchUpReason = catchUpReason ?? "the cache missed something for child \(child.lowercased)"
                case .duplicate:
                    logger.debug("already stored: \(event.summary)")
                case .needsCatchUp(let reason):
                    catchUpReason = catchUpReason ?? reason
                case .rejected(let reason, let first):
                    if first { logger.warning("set aside, not stored (`allowance-relay status` lists it): \(reason)") }
                }
            }
            wishLists.balancesMoved(moved)
            if let f = storeFailure {
                logger.notice(
                    "storing works again: \(f.events) event(s) could not be stored since \(f.since); the catch-up fetches them"
                )
                storeFailure = nil
            }
        } catch  where error.isConflict {
            for span in spans { span.failed(error.message) }
            enterConflict(error.message)
            return
        } catch {
            for span in spans { span.failed(error.message) }
            // Not stored: the next catch-up fetches them from the server again.
            let message = "\(error)"
            if storeFailure?.message == message {
                storeFailure?.events += events.count
                logger.debug("could not store \(events.count) event(s): \(message)")
                requestCatchUp()  // coalesces with the one asked for at the first failure
                return
            }
            storeFailure = (message, Date(), events.count)
            logger.error("could not store \(events.count) event(s): \(message)")
            catchUpReason = "events could not be stored"
        }
        if let catchUpReason {
            logger.notice("\(catchUpReason); catching up")
            requestCatchUp()
        }
    }

    /// Stores what the hub connection decoded, a burst at a time, until the buffer is finished and empty;
    /// `received` sees each burst first (logs, metrics), `handled` once its SQLite transaction has ended. A
    /// transaction and its balance come as one burst: the connection holds the one for the other
    /// (`HubEvent.balanceFollows`).
    public func store(
        from events: HubEventBuffer<HubEvent>, received: ([HubEvent]) -> Void = { _ in },
        handled: ([HubEvent]) -> Void = { _ in }
    ) async {
        while let batch = await events.next() {
            received(batch)
            handle(batch)
            handled(batch)
        }
    }

    /// The sync state machine: each change is persisted for `status`, and logged when the phase or its detail
    /// changed (a new retry time alone is recorded, not logged).
    private func transition(_ phase: SyncStatus.Phase, _ detail: String, nextRetry: Date? = nil) {
        guard status?.phase != phase || status?.detail != detail || status?.nextRetry != nextRetry else { return }
        let previous = status
        status = SyncStatus(
            phase: phase, detail: detail, since: previous?.phase == phase ? previous!.since : Date(),
            nextRetry: nextRetry)
        if previous?.phase != phase || previous?.detail != detail {
            let line =
                previous?.phase == phase
                ? "sync: still \(phase.rawValue) (\(detail))"
                : "sync: \(previous?.phase.rawValue ?? "start") -> \(phase.rawValue) (\(detail))"
            if phase == .error { logger.error("\(line)") } else { logger.info("\(line)") }
        }
        do {
            try store.setSyncStatus(status!)
            statusWriteFailing = false
        } catch {
            // The cause (a full disk...) is already said by the line above or the store's own error.
            if !statusWriteFailing { logger.error("could not record the sync state: \(error)") }
            statusWriteFailing = true
        }
    }

    /// The hub link is down: the cache may be missing events until the next catch-up.
    public func linkLost(_ reason: String) {
        transition(.offline, "hub connection lost: \(reason)")
    }

    /// A new hub connection: the backend is back. Writes waiting for a retry go now (after the catch-up), not at
    /// the end of a back-off that began while it was away.
    public func linkRestored() {
        do { try store.outboxDueNow(at: Date()) } catch { logger.error("outbox: \(error)") }
        requestCatchUp()
    }

    /// Said once, with the evidence and the fix; the sinks that ask for `sync.conflict` are told. The hub link
    /// stays up, so `status` and the metrics keep working.
    private func enterConflict(_ message: String) {
        guard machine.enterConflict(message) == .new else { return }
        logger.error("\(message)")
        transition(
            .error, "the server's data contradicts the cache; nothing is stored until `allowance-relay run --rebuild`")
        do {
            try store.raise(RelayEvent(kind: .syncConflict, at: Date(), detail: message))
        } catch {
            logger.error("could not record the sync.conflict alert: \(error)")
        }
    }

    /// Whether a catch-up started (false: one is under way and will go again, or a conflict stops them).
    @discardableResult
    public func requestCatchUp() -> Bool {
        guard machine.requestCatchUp() == .start else { return false }
        Task(executorPreference: executor) { await self.catchUpLoop() }
        return true
    }

    private func catchUpLoop() async {
        var attempt = 0
        var failed = false
        repeat {
            if let last = lastCatchUpStart, ContinuousClock.now < last + catchUpSpacing {
                try? await Task.sleep(until: last + catchUpSpacing)
            }
            lastCatchUpStart = .now
            machine.roundBegins()
            transition(.syncing, "catching up")
            while machine.beginFetch() == .busy { await withCheckedContinuation { drainEnded.append($0) } }
            failed = false
            do {
                do {
                    defer { machine.endFetch() }
                    try await runCatchUp()
                }
                caughtUp?()
                wishLists.caughtUp()
                attempt = 0
                if await drainOutbox().ok {
                    if let next = try? store.nextOutboxAttempt(after: Date()) {
                        transition(
                            .offline, "caught up; write(s) waiting in the outbox for their next attempt",
                            nextRetry: next)
                    } else {
                        transition(.idle, "caught up")
                    }
                }
            } catch let error as StoreError where error.isConflict {
                enterConflict(error.message)
            } catch {
                failed = true
                attempt += 1
                let delay = Self.catchUpBackoff.seconds(retry: attempt)
                let retry = Date().addingTimeInterval(delay)
                if let api = error as? APIError, api.kind.isRetryable {
                    transition(.offline, "backend unreachable: \(api.message)", nextRetry: retry)
                } else {
                    transition(.error, "catch-up failed: \(error)", nextRetry: retry)
                }
                try? await Task.sleep(for: .seconds(delay))
            }
        } while machine.roundEnded(failed: failed) == .again
    }

    /// One catch-up; a span when tracing, whose trace the deliveries it plans continue.
    private func runCatchUp() async throws {
        guard tracing else {
            _ = try await catchUp.run()
            return
        }
        let span = InstrumentationSystem.tracer.startSpan("catch-up", context: .topLevel, ofKind: .internal)
        defer { span.end() }
        do {
            let report = try await catchUp.run(traceParent: TraceParent.of(span.context))
            span.attributes["allowance.stored"] = report.stored
        } catch {
            span.failed("\(error)")
            throw error
        }
    }

    /// A consumer span for one hub event, from its arrival at the writer to its commit (messaging conventions).
    private static func eventSpan(_ event: HubEvent) -> any Span {
        let span = InstrumentationSystem.tracer.startSpan(
            "process \(event.target)", context: .topLevel, ofKind: .consumer)
        span.attributes["messaging.system"] = "signalr"
        span.attributes["messaging.operation.type"] = "process"
        span.attributes["messaging.destination.name"] = event.target
        if let child = event.childId { span.attributes["allowance.child.id"] = child.lowercased }
        if case .transactionCreated(let t) = event { span.attributes["allowance.transaction.id"] = t.id.lowercased }
        return span
    }

    /// Sends due outbox writes in order (`OutboxDrain`); a write that must wait for a retry makes the link offline
    /// until it goes.
    @discardableResult
    public func drainOutbox() async -> (ok: Bool, sent: Int) {
        // During a catch-up's fetch the catch-up drains when it is done.
        guard machine.beginDrain() == .granted else { return (false, 0) }
        defer {
            machine.endDrain()
            for waiting in drainEnded { waiting.resume() }
            drainEnded.removeAll()
        }
        let (end, sent) = await OutboxDrain(outbox: store, api: api, limits: limits, logger: logger).run()
        switch end {
        case .emptied:
            return (true, sent)
        case .waiting(let retry, let error):
            let waiting = (try? store.outboxWaiting()) ?? 0
            transition(.offline, "\(waiting) write(s) waiting in the outbox: \(error)", nextRetry: retry)
            return (false, sent)
        case .failed:
            return (false, sent)
        }
    }

    /// Writes can be queued by another process (`allowance-relay transaction add`): look for due ones now and then.
    public func pollOutbox(every interval: Duration) async {
        while !Task.isCancelled {
            // At most `interval`, less when a write waiting for a retry falls due sooner.
            let next = (try? store.nextOutboxAttempt(after: Date())).flatMap { $0 }.map {
                max(0.05, $0.timeIntervalSinceNow)
            }
            try? await Task.sleep(for: min(interval, next.map { .seconds($0) } ?? interval))
            let result = await drainOutbox()
            // The outbox was what kept us offline, and it has now gone through.
            if result.ok, result.sent > 0, status?.phase == .offline, status?.detail.contains("outbox") == true {
                transition(.idle, "outbox sent")
            }
        }
    }
}

extension Span {
    fileprivate func failed(_ message: String) {
        setStatus(SpanStatus(code: .error, message: message))
    }
}

extension ApplyResult {
    /// What became of the event, for its span.
    fileprivate var outcome: String {
        switch self {
        case .stored: "stored"
        case .duplicate: "duplicate"
        case .needsCatchUp: "needs catch-up"
        case .rejected: "set aside"
        }
    }
}
