import Alerts
import AllowanceAPI
import Core
import Foundation

/// One alert owed to one sink, as the ledger holds it.
public struct Delivery: Sendable, Equatable {
    /// Where a delivery is in its life, stored as its raw value.
    public enum State: String, Sendable, CaseIterable {
        case pending
        case delivered
        /// Given up, with the reason in `lastError`; `deliveries retry` queues it again.
        case dead
        /// Folded into a digest delivery (`merged_into`).
        case merged
        /// Not sent: the sink was muted for the child when it was planned (`last_error` says until when).
        case muted
        /// Written while a send was under way by the workers of earlier development builds; read as pending.
        case inFlight = "in_flight"

        /// The states a sink's deliveries are gauged in (`/metrics`): what is still owed, and the dead letters. What
        /// was sent, merged or muted is history, counted by `status`.
        public static let owed: [State] = waiting + [.dead]
    }

    public var id: String
    public var sink: String
    public var rule: String
    public var kind: RelayEvent.Kind
    public var childId: UUID?
    public var urgency: PlannedDelivery.Urgency
    /// The alert as stored when it was planned: its JSON, final (the delivery's kind, the currency). The generic
    /// webhook sends it as it is; other sinks decode it (`event`) to fill their templates.
    public var alert: String
    public var digest: Bool
    public var state: State
    public var attempts: Int
    public var nextAttemptAt: Date
    public var lastError: String?
    public var createdAt: Date
    public var deliveredAt: Date?
    /// The W3C `traceparent` of the event that planned it, when tracing was on: its sends join that trace.
    public var traceParent: String? = nil

    /// The alert as a value, when the delivery was handed from the planner in memory (the steady path); nil when
    /// it was read from the ledger, whose `alert` text `event` then decodes.
    public var carried: RelayEvent? {
        get { carriedAlert?.event }
        set { carriedAlert = newValue.map(CarriedAlert.init) }
    }

    /// `carried`, shared by every copy: a delivery is copied at each hand-over (planner, ledger, engine, worker), and
    /// a copy of the alert's value retained each of its texts: copies of deliveries were 28 of the 193 releases a hub
    /// event cost in a blast (uprobes, `Benchmarks/blast_counts.py`).
    /// (The planner gives every delivery of one alert the same box.)
    var carriedAlert: CarriedAlert?

    final class CarriedAlert: Sendable, Equatable {
        let event: RelayEvent
        init(_ event: RelayEvent) { self.event = event }
        static func == (a: CarriedAlert, b: CarriedAlert) -> Bool { a === b || a.event == b.event }
    }

    /// Every field, for another ledger's rows (the shared PostgreSQL one).
    public init(
        id: String, sink: String, rule: String, kind: RelayEvent.Kind, childId: UUID?, urgency: PlannedDelivery.Urgency,
        alert: String,
        digest: Bool, state: State, attempts: Int, nextAttemptAt: Date, lastError: String? = nil, createdAt: Date,
        deliveredAt: Date? = nil,
        traceParent: String? = nil, carried: RelayEvent? = nil
    ) {
        self.id = id
        self.sink = sink
        self.rule = rule
        self.kind = kind
        self.childId = childId
        self.urgency = urgency
        self.alert = alert
        self.digest = digest
        self.state = state
        self.attempts = attempts
        self.nextAttemptAt = nextAttemptAt
        self.lastError = lastError
        self.createdAt = createdAt
        self.deliveredAt = deliveredAt
        self.traceParent = traceParent
        self.carriedAlert = carried.map(CarriedAlert.init)
    }

    /// The alert as a value: the one carried, or the stored text decoded once (for templates, digests, the CLI).
    public var event: RelayEvent {
        get throws(APIError) {
            if let carried { return carried }
            let json: JSONValue
            do { json = try JSONValue(parsing: alert.utf8) } catch {
                throw APIError(.invalidPayload, "alert: \(error)")
            }
            return try RelayEvent(json: json)
        }
    }
}

/// What a sink worker needs of the delivery ledger, and nothing more: the queue behind one interface, which the
/// SQLite file (`Store`) and the database relays share (`SharedRelayStore`) both implement.
public protocol DeliveryLedger: Sendable {
    /// How long a sink worker with nothing due may wait before it looks again, for a change no signal told it of.
    /// A file's other processes signal the relay (SIGUSR1) when they change its ledger, so on a file this only
    /// catches a signal that could not be sent; on a shared ledger a replica may take rows after this one looked and
    /// die holding them, and no one is told.
    var unsignalledChangesSeenWithin: Duration { get }
    /// Due deliveries of `sink`, oldest first, leaving out `excluding`, taken for this relay: a file (one relay)
    /// writes nothing for taking them; a shared ledger claims them, so no other replica takes them meanwhile.
    func dueDeliveries(sink: String, at now: Date, limit: Int, excluding: Set<String>) throws(StoreError) -> [Delivery]
    /// The due deliveries, and when the next of the others falls due.
    func dueDeliveriesAndNext(
        sink: String, at now: Date, limit: Int, excluding: Set<String>
    ) throws(StoreError) -> (due: [Delivery], next: Date?)
    /// When the next delivery of `sink` not in `excluding` falls due (nil: none pending).
    func nextDeliveryDue(sink: String, excluding: Set<String>) throws(StoreError) -> Date?
    /// The outcomes of several sends, together.
    func record(_ results: [(id: String, result: JobOutcome)]) throws(StoreError)
    /// The same, written with the next write's commit when one comes within `window` (a store that cannot carry
    /// them writes them at once). Returns once they are written.
    func record(
        _ results: [(id: String, result: JobOutcome)], withNextWriteWithin window: Duration)
        async throws(StoreError)
    /// A child's deliveries of `sink` that may fold into one digest, due by `dueBy`.
    func foldableDeliveries(sink: String, child: UUID, dueBy: Date) throws(StoreError) -> [Delivery]
    /// Merges the waiting deliveries of `kind` for (sink, child) that the newest waiting one supersedes
    /// (`Delivery.superseding`): they become `merged` into it, and only it goes out. Rows in `excluding` (being sent)
    /// are left alone. Returns the ids merged.
    func mergeSuperseded(
        sink: String, child: UUID, kind: RelayEvent.Kind, excluding: Set<String>
    ) throws(StoreError) -> Set<String>
    /// Replaces `parts` by one digest delivery (its own id from then on).
    func foldIntoDigest(
        _ parts: [Delivery], digest: RelayEvent, currency: String?, at now: Date
    ) throws(StoreError) -> Delivery
    /// Sinks switched off (by a 410 or the like) and why.
    func disabledSinks() throws(StoreError) -> [String: String]
    func disableSink(_ sink: String, reason: String, at now: Date) throws(StoreError)
    /// Records that `sink` fails (`health`), or works again (nil).
    func setSinkHealth(_ sink: String, _ health: SinkHealth?) throws(StoreError)
    /// The sinks failing now, as their workers recorded it.
    func sinkHealth() throws(StoreError) -> [String: SinkHealth]
    /// The destination asked to wait (a 429's `Retry-After`, a failure's back-off): no delivery of `sink` is handed
    /// out before `until`, by any relay that shares this ledger.
    func pauseSink(_ sink: String, until: Date) throws(StoreError)
    /// An event of the relay's own (a sink switched off), planned like any other.
    @discardableResult func raise(_ event: RelayEvent) throws(StoreError) -> Int
    /// The child's balance now (a digest shows it as it is when it is sent, not as its last transaction left it).
    func currentBalance(child: UUID) throws(StoreError) -> Decimal?
}

/// The ledger's order and merging, one policy for both stores.
extension Delivery {
    /// Kinds that state the present (a child's balance, which a chat shows by editing one message): a newer one makes
    /// the older ones still waiting worthless to a person, so a sink read by people sends only the newest.
    public static let superseding: Set<RelayEvent.Kind> = [.balanceUpdated]

    /// Kinds that go before routine alerts on the same sink: a summary is due at a time the family chose, and a digest
    /// explains the balance edits after it.
    public static let first: [RelayEvent.Kind] = [.summary, .digest]

    /// `first` as SQL, for both stores' reads and the file's partial index (the same text, so SQLite uses it).
    public static var firstSQL: String { "kind IN (" + first.map { "'\($0.rawValue)'" }.joined(separator: ", ") + ")" }

    /// Whether this delivery goes before the routine ones (`first`).
    public var goesFirst: Bool { Self.first.contains(kind) }

    /// The order a sink sends what is due: the `first` kinds, then the rest, each oldest first.
    public static func sendingOrder(_ a: Delivery, _ b: Delivery) -> Bool {
        a.goesFirst != b.goesFirst ? a.goesFirst : a.createdAt < b.createdAt
    }
}

extension DeliveryLedger {
    /// At once, for a ledger whose writes are not a commit of the relay's own to carry them (a shared database).
    public func record(
        _ results: [(id: String, result: JobOutcome)], withNextWriteWithin window: Duration
    )
        async throws(StoreError)
    {
        try record(results)
    }

    /// In two reads, for a ledger that has no single one.
    public func dueDeliveriesAndNext(
        sink: String, at now: Date, limit: Int, excluding: Set<String>
    ) throws(StoreError) -> (due: [Delivery], next: Date?) {
        let due = try dueDeliveries(sink: sink, at: now, limit: limit, excluding: excluding)
        guard due.count < limit else { return (due, now) }
        let next = try nextDeliveryDue(sink: sink, excluding: excluding.union(due.map(\.id)))
        return (due, next)
    }
}
