import Alerts
import AllowanceAPI
import Core
import Foundation
import PostgresTransport
import StoreContract
import Synchronization

/// The relay's state on a PostgreSQL server that several replicas share (`store.url`): the whole storage contract
/// (`RelayStore`, `SyncStore`), with the delivery ledger and the outbox as queues that any replica claims from.
///
/// - The link holder (one replica at a time, `LinkLease`) stores each hub event and plans its deliveries in one
///   transaction, as the SQLite store does, and runs the one sync engine's catch-ups on it; the commit notifies
///   `relay_delivery`, which wakes every replica's workers.
/// - A worker's read of due deliveries claims them (`FOR UPDATE SKIP LOCKED`, state `in_flight`, owned by its replica)
///   for `claimFor`. The replica renews its claims while it lives (`renewClaims`), so a slow send is not taken by
///   another; a killed replica stops renewing, and its claims are taken again within `claimFor`, with the same ids:
///   the `webhook-id` a receiver deduplicates on.
/// - Outcomes are written only where the claim is still this replica's.
public final class SharedRelayStore: Sendable {
    public let location: PostgresLocation
    /// This replica's name: the owner of its claims, its row in `relay_replicas`.
    public let replica: String
    /// The link holder's writes (events, catch-ups) and the CLI's reads.
    let writer: SessionSlot
    /// The workers' claims and outcomes.
    let work: SessionSlot
    private let planner = Mutex<PlannerBox?>(nil)
    private let gathering = Mutex(DigestGathering())
    /// The sinks whose claims hand out one delivery per child at a time (`setOrderedSinks`).
    let orderedSinks = Mutex<Set<String>>([])
    /// Wakes this replica's heartbeat, which sleeps while there is nothing to renew or write: signalled when the
    /// replica takes a claim (and by the daemon when the link changes hands).
    public let heartbeatDue = Wakeup()
    /// The listening session `holdName` opened with the presence lock taken, until `listen` starts on it.
    private let namedSession = Mutex<PostgresConnection?>(nil)

    /// How long a claim lasts without being renewed: the longest a killed replica's deliveries wait for another.
    /// Renewed every second, so two heartbeats may be late; with 4 s, a killed sender left a 3.4 s pause in one
    /// test run, too near the 5 s a takeover may take.
    public static let claimFor: Duration = .seconds(3)
    /// The channel a commit that planned deliveries notifies.
    public static let channel = "relay_delivery"

    public static let migrations = [
        ReplicaRegistry.migration, relayTables, outboxTable, memoryTables, syncTables, goalTables,
    ]

    static let relayTables = PostgresMigration(
        2, "relay",
        """
        CREATE TABLE relay_child (
            id text PRIMARY KEY, name text NOT NULL, balance_minor bigint NOT NULL DEFAULT 0,
            updated_at timestamptz NOT NULL DEFAULT now());
        CREATE TABLE relay_txn (
            id text PRIMARY KEY, child_id text NOT NULL, amount_minor bigint NOT NULL, type text NOT NULL,
            description text NOT NULL, balance_after_minor bigint NOT NULL, created_at timestamptz NOT NULL,
            created_by text NOT NULL, via text NOT NULL, stored_at timestamptz NOT NULL DEFAULT now());
        CREATE INDEX relay_txn_recent ON relay_txn (created_at DESC, id);
        CREATE TABLE relay_delivery (
            id text PRIMARY KEY, sink text NOT NULL, rule text NOT NULL, kind text NOT NULL, child_id text,
            urgency text NOT NULL, alert text NOT NULL, digest boolean NOT NULL DEFAULT false, dedup_key text,
            state text NOT NULL, attempts integer NOT NULL DEFAULT 0, due_at timestamptz NOT NULL,
            claimed_by text, claim_expires_at timestamptz, last_error text, merged_into text,
            created_at timestamptz NOT NULL DEFAULT now(), delivered_at timestamptz, trace_parent text);
        CREATE INDEX relay_delivery_due ON relay_delivery (sink, due_at, id) WHERE state = 'pending';
        CREATE INDEX relay_delivery_claims ON relay_delivery (sink, claim_expires_at) WHERE state = 'in_flight';
        CREATE INDEX relay_delivery_owner ON relay_delivery (claimed_by) WHERE state = 'in_flight';
        CREATE INDEX relay_delivery_dedup ON relay_delivery (sink, dedup_key, created_at) WHERE dedup_key IS NOT NULL;
        CREATE INDEX relay_delivery_recent ON relay_delivery (created_at DESC, id);
        CREATE TABLE relay_sink_state (sink text PRIMARY KEY, disabled_reason text NOT NULL, disabled_at timestamptz NOT NULL);
        CREATE TABLE relay_sync (key text PRIMARY KEY, value text NOT NULL)
        """)

    private final class PlannerBox: Sendable {
        let planner: any AlertPlanner
        init(_ planner: any AlertPlanner) { self.planner = planner }
    }

    /// For the sessions opened beside the slots (the listener's).
    private let password: String?

    private init(location: PostgresLocation, password: String?, replica: String) {
        self.location = location
        self.replica = replica
        self.password = password
        writer = SessionSlot(location, password: password, applicationName: "allowance-relay \(replica)")
        work = SessionSlot(location, password: password, applicationName: "allowance-relay \(replica) workers")
    }

    /// Connects and brings the schema up to date (replicas starting together apply each step once).
    public static func open(
        _ location: PostgresLocation, password: String?, replica: String
    ) throws(StoreError) -> SharedRelayStore {
        let store = SharedRelayStore(location: location, password: password, replica: replica)
        try store.writing { db throws(PostgresError) in try PostgresMigrator.migrate(db, migrations) }
        return store
    }

    public func close() {
        writer.close()
        work.close()
        namedSession.withLock { $0.take() }?.close()
    }

    func installPlanner(_ planner: (any AlertPlanner)?) {
        self.planner.withLock { $0 = planner.map(PlannerBox.init) }
    }

    /// A value the link holder keeps (`history_taken`, the server's identity).
    public func syncValue(_ key: String) throws(StoreError) -> String? {
        try writing { db throws(PostgresError) -> String? in
            try db.query("SELECT value FROM relay_sync WHERE key = $1", [key]).scalar
        }
    }

    public func setSyncValue(_ key: String, _ value: String) throws(StoreError) {
        try writing { db throws(PostgresError) in
            try db.query(
                "INSERT INTO relay_sync (key, value) VALUES ($1, $2) ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
                [key, value])
        }
    }

    /// Plans `event`'s deliveries inside the caller's transaction (`DeliveryPlanning`, the one policy); how many
    /// were written (muted ones included). `childHasGoals`: whether the event's child has an item not bought, when
    /// the caller holds its row's lock and knows (nil: the wish list is read).
    @discardableResult
    func plan(
        _ db: PostgresConnection, _ event: RelayEvent, now: Date, childHasGoals: Bool? = nil
    ) throws(PostgresError) -> Int {
        // Compared whether or not a rule watches goals: a rule added later starts from the true state.
        let goals = childHasGoals == false ? [] : try goalsReached(db, by: event)
        guard let planner = planner.withLock({ $0?.planner }) else { return 0 }
        var count = try DeliveryPlanning.plan(event, planner: planner, gathering: gathering, now: now) {
            (sink, key, since) throws(PostgresError) -> Bool in
            try !db.query(
                "SELECT 1 FROM relay_delivery WHERE sink = $1 AND dedup_key = $2 AND created_at >= $3::timestamptz LIMIT 1",
                [sink, key, ISODate.string(since)]
            ).rows.isEmpty
        } write: { (d, key) throws(PostgresError) in
            try db.query(
                """
                INSERT INTO relay_delivery (id, sink, rule, kind, child_id, urgency, alert, digest, dedup_key, state, due_at,
                                            last_error, created_at, trace_parent)
                VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11::timestamptz, $12, $13::timestamptz, $14)
                """,
                [
                    d.id, d.sink, d.rule, d.kind.rawValue, d.childId?.lowercased, d.urgency.rawValue, d.alert,
                    d.digest ? "true" : "false", key, d.state.rawValue, ISODate.string(d.nextAttemptAt), d.lastError,
                    ISODate.string(now), d.traceParent,
                ])
        }.count
        for goal in goals { count += try plan(db, goal, now: now) }
        return count
    }

    /// The channels other relays' commits notify, listened to by `listen`.
    public static var channels: [String] { [channel, outboxChannel, mutesChannel, retryChannel] }

    /// Notified when a person asks for waiting alerts now (`deliveries retry`, `deliveries enable`).
    public static let retryChannel = "relay_retry"

    /// Takes this replica's name for the run: opens the session that will listen for other relays (`listen`) and
    /// takes the replica's presence lock on it (`ReplicaRegistry`). The lock is the name's ownership, so of two
    /// relays started under one name at the same moment only one has it. False while another session holds it:
    /// another relay under the name, or the session of this name's earlier run, which the server ends within
    /// seconds (ask again).
    public func holdName() throws(StoreError) -> Bool {
        if namedSession.withLock({ $0 != nil }) { return true }
        do throws(PostgresError) {
            let db = try listenerSession()
            guard try ReplicaRegistry(db).holdPresence(replica) else {
                db.close()
                return false
            }
            namedSession.withLock { $0 = db }
            return true
        } catch {
            throw Self.storeError(error, location)
        }
    }

    private func listenerSession() throws(PostgresError) -> PostgresConnection {
        let db = try PostgresConnection(
            location, password: password, applicationName: "allowance-relay \(replica) listener")
        do {
            try db.keepWhileIdle()
        } catch {
            db.close()
            throw error
        }
        return db
    }

    /// Waits for what other relays did (deliveries planned or given back, writes queued, mutes changed) on a session
    /// of its own, calling `heard` with the channels notified, until `running` says no: whoever makes it say no
    /// signals `wake`, and the session sleeps until one or the other (no timer: at rest it does not wake). At each
    /// (re)start `heard` gets every channel (what was committed before LISTEN took effect is looked at once); a lost
    /// session is opened again a second later, `failed` hearing the first failure and `nil` when it listens again.
    /// Blocks: run it on a thread of its own.
    public func listen(
        while running: @Sendable () -> Bool, wake: PollWake, heard: @Sendable (Set<String>) -> Void,
        failed: @Sendable (StoreError?) -> Void
    ) {
        var failing = false
        while running() {
            do throws(PostgresError) {
                // The first session is the one `holdName` took the name on, if it was asked to.
                let named = namedSession.withLock { $0.take() }
                let db: PostgresConnection
                if let named { db = named } else { db = try listenerSession() }
                defer { db.close() }
                // The replica is up while this session holds its presence lock (`ReplicaRegistry`). Still held by
                // the session this one replaces (the server has not seen it end yet), or by another relay under the
                // same name: asked again each second until it is this session's.
                let registry = ReplicaRegistry(db)
                var present = named != nil
                if !present { present = try registry.holdPresence(replica) }
                for channel in Self.channels { try db.listen(channel) }
                heard(Set(Self.channels))
                if failing { failed(nil) }
                failing = false
                while running() {
                    let notified = Set(
                        try db.notifications(timeout: present ? nil : .seconds(1), wake: wake).map(\.channel))
                    if !notified.isEmpty { heard(notified) }
                    if !present { present = try registry.holdPresence(replica) }
                }
            } catch {
                if !failing { failed(Self.storeError(error, location)) }
                failing = true
                heard(Set(Self.channels))  // polled meanwhile
                Thread.sleep(forTimeInterval: 1)
            }
        }
    }

    // MARK: - Claims

    /// This replica's claims (deliveries and outbox writes) last another `claimFor`. Returns how many it holds.
    @discardableResult
    public func renewClaims() throws(StoreError) -> Int {
        try working { db throws(PostgresError) -> Int in
            var held = 0
            for table in ["relay_delivery", "relay_outbox"] {
                held += try db.query(
                    """
                    UPDATE \(table) SET claim_expires_at = now() + make_interval(secs => $2::float8)
                    WHERE state = 'in_flight' AND claimed_by = $1
                    """, [replica, String(Self.claimFor.inSeconds)]
                ).affected
            }
            return held
        }
    }

    /// `rows` just claimed for this replica: its heartbeat is told when there are any.
    func claimed<Rows: Collection>(_ rows: Rows) -> Rows {
        if !rows.isEmpty { heartbeatDue.signal() }
        return rows
    }

    /// A graceful stop: what this replica claimed and did not finish is pending again at once, for any replica.
    @discardableResult
    public func releaseClaims() throws(StoreError) -> Int {
        let released = try working { db throws(PostgresError) -> Int in
            try db.transaction { () throws(PostgresError) -> Int in
                let n = try db.query(
                    "UPDATE relay_delivery SET state = 'pending', claimed_by = NULL, claim_expires_at = NULL WHERE state = 'in_flight' AND claimed_by = $1",
                    [replica]
                ).affected
                if n > 0 { try db.notify(Self.channel) }
                let writes = try db.query(
                    "UPDATE relay_outbox SET state = 'pending', claimed_by = NULL, claim_expires_at = NULL WHERE state = 'in_flight' AND claimed_by = $1",
                    [replica]
                ).affected
                if writes > 0 { try db.notify(Self.outboxChannel) }
                return n + writes
            }
        }
        return released
    }

    // MARK: - Sessions and rows

    /// A PostgreSQL failure as the store's error: the server's words, never a password (libpq has none in them).
    @discardableResult
    func writing<T>(_ body: (PostgresConnection) throws(PostgresError) -> T) throws(StoreError) -> T {
        do { return try writer.with(body) } catch { throw Self.storeError(error, location) }
    }

    /// The same on `work`, the session of the workers' claims and outcomes.
    @discardableResult
    func working<T>(_ body: (PostgresConnection) throws(PostgresError) -> T) throws(StoreError) -> T {
        do { return try work.with(body) } catch { throw Self.storeError(error, location) }
    }

    static func storeError(_ error: PostgresError, _ location: PostgresLocation) -> StoreError {
        switch error.kind {
        case .connect, .lost:
            StoreError(
                path: location.description,
                "\(error.message). The relay tries again; check that the server is up and store.url is right.",
                code: .unreadable)
        case .location:
            StoreError(path: location.description, error.message, code: .refused)
        case .statement:
            StoreError(path: location.description, "PostgreSQL refused a statement: \(error)", code: .sqlite)
        }
    }

    /// A text array as PostgreSQL's literal (`{a,b}`), for ids made of letters, digits, `_` and `-`.
    static func array(_ values: some Collection<String>) -> String {
        "{" + values.joined(separator: ",") + "}"
    }

    /// The columns `delivery(_:)` reads, of the table named `table` (or the only one).
    static func deliveryColumns(_ table: String = "") -> String {
        let t = table.isEmpty ? "" : table + "."
        return """
            \(t)id, \(t)sink, \(t)rule, \(t)kind, \(t)child_id, \(t)urgency, \(t)alert, \(t)digest, \(t)state, \(t)attempts,
            extract(epoch FROM \(t)due_at), \(t)last_error, extract(epoch FROM \(t)created_at), extract(epoch FROM \(t)delivered_at),
            \(t)trace_parent
            """
    }

    /// A row of `deliveryColumns` as a delivery (nil: a kind, urgency or state this version does not know).
    static func delivery(_ row: [String?]) -> Delivery? {
        guard let id = row[0], let sink = row[1], let kind = row[3].flatMap(RelayEvent.Kind.init(rawValue:)),
            let urgency = row[5].flatMap(PlannedDelivery.Urgency.init(rawValue:)),
            let state = row[8].flatMap(Delivery.State.init(rawValue:))
        else { return nil }
        func date(_ text: String?) -> Date? { text.flatMap(Double.init).map(Date.init(timeIntervalSince1970:)) }
        return Delivery(
            id: id, sink: sink, rule: row[2] ?? "", kind: kind, childId: row[4].flatMap(UUID.init(uuidString:)),
            urgency: urgency,
            alert: row[6] ?? "", digest: row[7] == "t", state: state, attempts: Int(row[9] ?? "") ?? 0,
            nextAttemptAt: date(row[10]) ?? .distantPast, lastError: row[11], createdAt: date(row[12]) ?? .distantPast,
            deliveredAt: date(row[13]), traceParent: row[14])
    }
}
