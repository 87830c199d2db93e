import AllowanceAPI
import Foundation

/// What the CLI reads and changes, the same on either store: the ledger's rows and their retries, a sink switched
/// back on, finished rows purged, the outbox's writes queued, retried or dropped, and what `status` shows. A change
/// made here reaches the running relays (a signal to a file's relay; a notification on a shared database).
public protocol OperatorStore: Sendable {
    /// The newest deliveries, newest first (`sink`, `state`: only those).
    func deliveries(sink: String?, state: Delivery.State?, limit: Int) throws(StoreError) -> [Delivery]
    /// One delivery by id (nil: none).
    func delivery(id: String) throws(StoreError) -> Delivery?
    /// Queues dead deliveries again (one by id, or all of a sink's), with a fresh count of attempts.
    @discardableResult func retryDeliveries(id: String?, sink: String?, at now: Date) throws(StoreError) -> Int
    /// Switches a sink back on; its waiting deliveries are due now.
    func enableSink(_ sink: String, at now: Date) throws(StoreError)
    /// Deletes finished deliveries (delivered, merged, and dead when asked) created before `before`.
    @discardableResult func purgeDeliveries(before: Date, includingDead: Bool) throws(StoreError) -> Int
    /// Every write of the outbox, oldest first.
    func outbox() throws(StoreError) -> [OutboxEntry]
    /// Queues a write for the server (`transaction add`): refused when `limit` writes wait, the child is unknown, or
    /// a debit exceeds the balance.
    func enqueueTransaction(
        child: UUID, amount: Decimal, type: TransactionType, description: String, limit: Int, at now: Date
    ) throws(StoreError) -> OutboxEntry
    /// Makes a waiting, rejected or dead write due now.
    func retryOutbox(_ seq: Int64, at now: Date) throws(StoreError)
    /// Gives up a write that was not sent.
    func dropOutbox(_ seq: Int64, at now: Date) throws(StoreError)
    /// Everything `status` counts.
    func summary() throws(StoreError) -> StoreSummary
    /// The hub link as the relay holding it last recorded it (nil: never run).
    func linkStatus() throws(StoreError) -> LinkStatus?
    /// What the first catch-up took as history: how many transactions, and when.
    func historyTaken() throws(StoreError) -> (transactions: Int, at: Date)?
}

/// What `status` shows about the cache.
public struct StoreSummary: Sendable {
    /// The SQLite file's path, or the shared database's location (never its password).
    public var path: String
    /// What it takes on disk.
    public var fileBytes: Int64
    public var migrations: [String]
    public var children: Int
    public var transactions: Int
    /// Balances the hub sent, as they came, that no transaction's row records (the file's inbox; nil where the store
    /// keeps none).
    public var inboxRows: Int?
    /// Writes waiting to be sent (pending or in flight), and those given up (refused by the server, or dead).
    public var outboxWaiting: Int
    public var outboxRejected: Int
    public var lastCatchUp: Date?
    /// The last event pushed by the hub (not caught up); nil once pruned, or never.
    public var lastEvent: Date?
    /// The last time anything came from the server (a hub event or a catch-up).
    public var lastContact: Date?

    public init(
        path: String, fileBytes: Int64, migrations: [String], children: Int, transactions: Int, inboxRows: Int?,
        outboxWaiting: Int, outboxRejected: Int, lastCatchUp: Date?, lastEvent: Date?, lastContact: Date?
    ) {
        self.path = path
        self.fileBytes = fileBytes
        self.migrations = migrations
        self.children = children
        self.transactions = transactions
        self.inboxRows = inboxRows
        self.outboxWaiting = outboxWaiting
        self.outboxRejected = outboxRejected
        self.lastCatchUp = lastCatchUp
        self.lastEvent = lastEvent
        self.lastContact = lastContact
    }
}
