import Alerts
import AllowanceAPI
import Foundation
import GRDB
import Logging
import Relay
import SignalRProtocol
import Store
import StoreContract
import Synchronization
import TestSupport
import Testing

/// The store's ledger, but the first `refusals` writes of outcomes fail as a full disk makes them fail.
final class RefusingLedger: DeliveryLedger, @unchecked Sendable {
    let store: Store
    private let left: Mutex<Int>
    private let count = Mutex(0)
    var refused: Int { count.withLock { $0 } }

    init(_ store: Store, refusals: Int) {
        self.store = store
        left = Mutex(refusals)
    }

    var unsignalledChangesSeenWithin: Duration { store.unsignalledChangesSeenWithin }

    func record(_ results: [(id: String, result: JobOutcome)]) throws(StoreError) {
        let refuse = left.withLock { n in
            defer { n = max(0, n - 1) }
            return n > 0
        }
        if refuse {
            count.withLock { $0 += 1 }
            throw StoreError(
                path: store.path, "The disk is full; nothing was written. Free some space: the relay retries.")
        }
        try store.record(results)
    }

    func dueDeliveries(sink: String, at now: Date, limit: Int, excluding: Set<String>) throws(StoreError) -> [Delivery]
    {
        try store.dueDeliveries(sink: sink, at: now, limit: limit, excluding: excluding)
    }
    func nextDeliveryDue(sink: String, excluding: Set<String>) throws(StoreError) -> Date? {
        try store.nextDeliveryDue(sink: sink, excluding: excluding)
    }
    func foldableDeliveries(sink: String, child: UUID, dueBy: Date) throws(StoreError) -> [Delivery] {
        try store.foldableDeliveries(sink: sink, child: child, dueBy: dueBy)
    }
    func mergeSuperseded(
        sink: String, child: UUID, kind: RelayEvent.Kind, excluding: Set<String>
    ) throws(StoreError) -> Set<String> {
        try store.mergeSuperseded(sink: sink, child: child, kind: kind, excluding: excluding)
    }
    func foldIntoDigest(
        _ parts: [Delivery], digest: RelayEvent, currency: String?, at now: Date
    ) throws(StoreError) -> Delivery {
        try store.foldIntoDigest(parts, digest: digest, currency: currency, at: now)
    }
    func disabledSinks() throws(StoreError) -> [String: String] { try store.disabledSinks() }
    func setSinkHealth(_ sink: String, _ health: SinkHealth?) throws(StoreError) {
        try store.setSinkHealth(sink, health)
    }
    func sinkHealth() throws(StoreError) -> [String: SinkHealth] { try store.sinkHealth() }
    func disableSink(_ sink: String, reason: String, at now: Date) throws(StoreError) {
        try store.disableSink(sink, reason: reason, at: now)
    }
    func pauseSink(_ sink: String, until: Date) throws(StoreError) { store.pauseSink(sink, until: until) }
    @discardableResult func raise(_ event: RelayEvent) throws(StoreError) -> Int { try store.raise(event) }
    func currentBalance(child: UUID) throws(StoreError) -> Decimal? { try store.currentBalance(child: child) }
}

/// The store's ledger, counting the reads a worker makes.
final class CountingLedger: DeliveryLedger, @unchecked Sendable {
    let store: Store
    private let count = Mutex(0)
    var reads: Int { count.withLock { $0 } }

    /// `lookAgainWithin`: the ledger's `unsignalledChangesSeenWithin` (nil: the file's).
    init(_ store: Store, lookAgainWithin: Duration? = nil) {
        self.store = store
        self.lookAgainWithin = lookAgainWithin
    }

    private let lookAgainWithin: Duration?
    var unsignalledChangesSeenWithin: Duration { lookAgainWithin ?? store.unsignalledChangesSeenWithin }

    private func read<T>(_ body: () throws(StoreError) -> T) throws(StoreError) -> T {
        count.withLock { $0 += 1 }
        return try body()
    }

    func dueDeliveries(sink: String, at now: Date, limit: Int, excluding: Set<String>) throws(StoreError) -> [Delivery]
    {
        try read { () throws(StoreError) in
            try store.dueDeliveries(sink: sink, at: now, limit: limit, excluding: excluding)
        }
    }
    func dueDeliveriesAndNext(
        sink: String, at now: Date, limit: Int, excluding: Set<String>
    ) throws(StoreError) -> (due: [Delivery], next: Date?) {
        try read { () throws(StoreError) in
            try store.dueDeliveriesAndNext(sink: sink, at: now, limit: limit, excluding: excluding)
        }
    }
    func nextDeliveryDue(sink: String, excluding: Set<String>) throws(StoreError) -> Date? {
        try read { () throws(StoreError) in try store.nextDeliveryDue(sink: sink, excluding: excluding) }
    }
    func disabledSinks() throws(StoreError) -> [String: String] {
        try read { () throws(StoreError) in try store.disabledSinks() }
    }
    func record(_ results: [(id: String, result: JobOutcome)]) throws(StoreError) { try store.record(results) }
    func foldableDeliveries(sink: String, child: UUID, dueBy: Date) throws(StoreError) -> [Delivery] {
        try store.foldableDeliveries(sink: sink, child: child, dueBy: dueBy)
    }
    func mergeSuperseded(
        sink: String, child: UUID, kind: RelayEvent.Kind, excluding: Set<String>
    ) throws(StoreError) -> Set<String> {
        try store.mergeSuperseded(sink: sink, child: child, kind: kind, excluding: excluding)
    }
    func foldIntoDigest(
        _ parts: [Delivery], digest: RelayEvent, currency: String?, at now: Date
    ) throws(StoreError) -> Delivery {
        try store.foldIntoDigest(parts, digest: digest, currency: currency, at: now)
    }
    func disableSink(_ sink: String, reason: String, at now: Date) throws(StoreError) {
        try store.disableSink(sink, reason: reason, at: now)
    }
    func setSinkHealth(_ sink: String, _ health: SinkHealth?) throws(StoreError) {
        try store.setSinkHealth(sink, health)
    }
    func sinkHealth() throws(StoreError) -> [String: SinkHealth] { try store.sinkHealth() }
    func pauseSink(_ sink: String, until: Date) throws(StoreError) { store.pauseSink(sink, until: until) }
    @discardableResult func raise(_ event: RelayEvent) throws(StoreError) -> Int { try store.raise(event) }
    func currentBalance(child: UUID) throws(StoreError) -> Decimal? { try store.currentBalance(child: child) }
}
