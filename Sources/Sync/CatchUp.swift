import AllowanceAPI
import Foundation
import Logging
import Metrics
import Store

/// Fetches what the cache missed (after a restart or any reconnect: a new hub connection lost what was sent
/// while down). Pages each child's transactions newest first down to the child's cursor: the newest
/// transaction of the last completed catch-up. Not down to any transaction the cache holds, since a live event
/// may have been stored while an older one was skipped. A transaction created meanwhile only shifts the
/// pages, so it is seen twice (and deduplicated), never missed. No cursor (or one the server no longer has):
/// the whole history is read.
///
/// Each page is stored in its own SQLite transaction as it arrives (memory stays flat for long gaps; a crash
/// keeps what was stored). The cursors move only when every child is done, so an interrupted catch-up is
/// simply run again.
public struct CatchUp: Sendable {
    public struct Report: Sendable, Equatable {
        public var children: Int
        public var fetched: Int
        public var stored: Int
    }

    let store: Store
    let api: APIClient
    let pageSize: Int
    let logger: Logger

    public init(store: Store, api: APIClient, pageSize: Int = 100, logger: Logger = Logger(label: "catch-up")) {
        self.store = store
        self.api = api
        self.pageSize = pageSize
        self.logger = logger
    }

    public func run() async throws -> Report {
        // First: is this still the server the cache was filled from? (Throws a conflict when it is not.)
        if let note = try store.bindServer(try await api.identity()) { logger.notice("\(note)") }
        let children = try await api.children()
        var report = Report(children: children.count, fetched: 0, stored: 0)
        var cursors: [UUID: UUID] = [:]
        for child in children {
            let cursor = try store.catchUpCursor(child: child.id)
            var offset = 0
            scan: while true {
                let page = try await api.transactions(child: child.id, limit: pageSize, offset: offset)
                var fresh: [Transaction] = []
                var reachedCursor = false
                for t in page {
                    if t.id == cursor {
                        reachedCursor = true
                        break
                    }
                    fresh.append(t)
                }
                if cursors[child.id] == nil, let newest = fresh.first { cursors[child.id] = newest.id }
                report.fetched += fresh.count
                report.stored += try store.storeCaughtUp(children: children, transactions: fresh.reversed(), complete: false)
                if reachedCursor || page.count < pageSize { break scan }
                offset += pageSize
            }
        }
        // Balances as the server sees them now, not as at the start: events may have arrived meanwhile.
        let asked = Date()
        let latest = try await api.children()
        try store.storeCaughtUp(children: latest, transactions: [], cursors: cursors, balancesAskedAt: asked)
        Counter(label: "allowance_relay_caught_up_transactions_total").increment(by: report.stored)
        logger.info("caught up", metadata: ["children": "\(report.children)", "transactions": "\(report.stored)"])
        return report
    }
}
