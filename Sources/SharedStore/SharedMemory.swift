import Alerts
import AllowanceAPI
import Core
import Foundation
import PostgresTransport
import StoreContract

/// What the relay remembers beside the ledger, shared by every replica: the chat message standing for a child's
/// balance (edited by whichever replica sends the next change, also after the one that posted it died), the mutes
/// (set on one machine, held on all), and the periods each summary rule has done (planned once, by one replica).
extension SharedRelayStore: SentMessageLedger, ChildRoster, MuteStore, SummaryLedger, PlanningStore {
    static let memoryTables = PostgresMigration(
        4, "relay memory",
        """
        CREATE TABLE relay_sent_message (
            sink text NOT NULL, subject text NOT NULL, ref text NOT NULL, posted_at timestamptz NOT NULL,
            PRIMARY KEY (sink, subject));
        CREATE TABLE relay_mute (
            sink text NOT NULL, child_id text NOT NULL, until timestamptz NOT NULL, PRIMARY KEY (sink, child_id));
        CREATE TABLE relay_summary_due (rule text PRIMARY KEY, last_due timestamptz NOT NULL)
        """)

    /// The channel a change of the mutes notifies: every replica's rules read them again.
    public static let mutesChannel = "relay_mutes"

    // MARK: - Sent messages

    public func sentMessage(sink: String, subject: String) throws(StoreError) -> SentMessage? {
        try working { db throws(PostgresError) -> SentMessage? in
            guard
                let row = try db.query(
                    "SELECT ref, extract(epoch FROM posted_at) FROM relay_sent_message WHERE sink = $1 AND subject = $2",
                    [sink, subject]
                ).rows.first, let ref = row[0]
            else { return nil }
            return SentMessage(
                ref: ref, postedAt: row[1].flatMap(Double.init).map(Date.init(timeIntervalSince1970:)) ?? .distantPast)
        }
    }

    public func setSentMessage(sink: String, subject: String, _ message: SentMessage?) throws(StoreError) {
        try working { db throws(PostgresError) in
            if let message {
                try db.query(
                    """
                    INSERT INTO relay_sent_message (sink, subject, ref, posted_at) VALUES ($1, $2, $3, $4::timestamptz)
                    ON CONFLICT (sink, subject) DO UPDATE SET ref = EXCLUDED.ref, posted_at = EXCLUDED.posted_at
                    """, [sink, subject, message.ref, ISODate.string(message.postedAt)])
            } else {
                try db.query("DELETE FROM relay_sent_message WHERE sink = $1 AND subject = $2", [sink, subject])
            }
        }
    }

    // MARK: - Mutes

    public func mute(_ m: Mute) throws(StoreError) {
        try working { db throws(PostgresError) in
            try db.transaction { () throws(PostgresError) in
                try db.query(
                    """
                    INSERT INTO relay_mute (sink, child_id, until) VALUES ($1, $2, $3::timestamptz)
                    ON CONFLICT (sink, child_id) DO UPDATE SET until = EXCLUDED.until
                    """, [m.sink, m.childId.lowercased, ISODate.string(m.until)])
                try db.notify(Self.mutesChannel)
            }
        }
    }

    @discardableResult
    public func unmute(child: UUID, sink: String? = nil) throws(StoreError) -> Int {
        try working { db throws(PostgresError) -> Int in
            try db.transaction { () throws(PostgresError) -> Int in
                let n = try db.query(
                    "DELETE FROM relay_mute WHERE child_id = $1 AND ($2::text IS NULL OR sink = $2)",
                    [child.lowercased, sink]
                ).affected
                if n > 0 { try db.notify(Self.mutesChannel) }
                return n
            }
        }
    }

    public func mutes(at now: Date = Date()) throws(StoreError) -> [Mute] {
        try working { db throws(PostgresError) -> [Mute] in
            // Read only, as on the file: one row per sink and child at most (a later mute replaces it), so the
            // ended ones need no deleting.
            try db.query(
                "SELECT sink, child_id, extract(epoch FROM until) FROM relay_mute WHERE until > $1::timestamptz",
                [ISODate.string(now)]
            ).rows.compactMap {
                row -> Mute? in
                guard let sink = row[0], let child = row[1].flatMap(UUID.init(uuidString:)),
                    let until = row[2].flatMap(Double.init)
                else { return nil }
                return Mute(sink: sink, childId: child, until: Date(timeIntervalSince1970: until))
            }
        }
    }

    // MARK: - Summaries

    public func summaryLastDue(rule: String) throws(StoreError) -> Date? {
        try writing { db throws(PostgresError) -> Date? in
            try db.query("SELECT extract(epoch FROM last_due) FROM relay_summary_due WHERE rule = $1", [rule]).scalar
                .flatMap(Double.init).map(Date.init(timeIntervalSince1970:))
        }
    }

    /// The period's row is locked while its summaries are planned: two replicas whose schedulers wake together plan
    /// them once.
    @discardableResult
    public func raiseSummaries(
        rule: String, due: Date, events: [RelayEvent], baselineOnly: Bool = false
    ) throws(StoreError) -> Int {
        try writing { db throws(PostgresError) -> Int in
            try db.transaction { () throws(PostgresError) -> Int in
                try db.query(
                    "INSERT INTO relay_summary_due (rule, last_due) VALUES ($1, '-infinity') ON CONFLICT (rule) DO NOTHING",
                    [rule])
                let last = try db.query(
                    "SELECT extract(epoch FROM last_due) FROM relay_summary_due WHERE rule = $1 FOR UPDATE", [rule]
                ).scalar.flatMap(Double.init)
                if let last, last >= due.timeIntervalSince1970 { return 0 }
                var planned = 0
                if !baselineOnly {
                    for event in events { planned += try plan(db, event, now: Date()) }
                }
                try db.query(
                    "UPDATE relay_summary_due SET last_due = $2::timestamptz WHERE rule = $1",
                    [rule, ISODate.string(due)])
                if planned > 0 { try db.notify(Self.channel) }
                return planned
            }
        }
    }

    // MARK: - Planning

    /// The rules that plan deliveries for each stored event (nil: nothing is planned). `onPlanned` is not called:
    /// the rows belong to whichever replica claims them, and the commit's notification wakes every replica's workers.
    public func setPlanner(_ planner: (any AlertPlanner)?, onPlanned: (@Sendable ([Delivery]) -> Void)? = nil) {
        installPlanner(planner)
    }

    public func setOrderedSinks(_ sinks: Set<String>) {
        orderedSinks.withLock { $0 = sinks }
    }

    /// Nothing to requeue at a start: a claim left by a dead replica expires by itself (`claimFor`) and is taken again.
    public func requeueInFlightDeliveries() throws(StoreError) -> Int { 0 }
}

/// What the status endpoint reads, on the shared database: each replica records its own link state
/// (`relay_sync`, `link:<replica>`); the rest is the family's, the same from every replica.
extension SharedRelayStore: StatusSource {
    public func setLinkStatus(_ status: LinkStatus) throws(StoreError) {
        try setSyncValue("link:\(replica)", status.json.serialized)
    }

    public func outboxWaiting() throws(StoreError) -> Int {
        try working { db throws(PostgresError) -> Int in
            Int(
                try db.query("SELECT count(*) FROM relay_outbox WHERE state IN \(OutboxEntry.State.waitingSQL)").scalar
                    ?? "") ?? 0
        }
    }

    /// The newest rows by their own time, read from the end of its index; a hub row is one the link stored live.
    public func contact() throws(StoreError) -> StoreContact {
        try working { db throws(PostgresError) -> StoreContact in
            func newest(_ via: String?) throws(PostgresError) -> Date? {
                try db.query(
                    """
                    SELECT extract(epoch FROM stored_at) FROM relay_txn WHERE ($1::text IS NULL OR via = $1)
                    ORDER BY created_at DESC, id LIMIT 1
                    """, [via]
                ).scalar.flatMap(Double.init).map(Date.init(timeIntervalSince1970:))
            }
            let caughtUp = try db.query("SELECT value FROM relay_sync WHERE key = 'last_catch_up'").scalar
                .flatMap(ISODate.parse)
            let event = try newest("hub")
            let any = [caughtUp, try newest(nil)].compactMap { $0 }.max()
            return StoreContact(lastCatchUp: caughtUp, lastEvent: event, lastContact: any)
        }
    }

    public func storageBytes() throws(StoreError) -> Int64 {
        try working { db throws(PostgresError) -> Int64 in
            Int64(try db.query("SELECT pg_database_size(current_database())").scalar ?? "") ?? 0
        }
    }
}
