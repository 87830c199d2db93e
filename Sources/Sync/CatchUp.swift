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
/// The server's page size is not trusted: paging goes on until the cursor or an empty page, whatever the size
/// of the pages (a server capping them at 50 when 100 were asked loses nothing). A server that sends the same
/// page again, or never ends, is stopped with an error rather than followed forever. A row the relay cannot
/// keep (unreadable, an amount of 0, three decimals, a date in the future) is quarantined and reported; the
/// others are stored.
///
/// Each page is stored in its own SQLite transaction as it arrives (memory stays flat for long gaps; a crash
/// keeps what was stored). The cursors move only when every child is done, so an interrupted catch-up is
/// simply run again.
public struct CatchUp: Sendable {
    public struct Report: Sendable, Equatable {
        public var children: Int
        public var fetched: Int
        public var stored: Int
        /// Rows the server sent that were quarantined for the first time.
        public var rejected: Int = 0
    }

    let store: Store
    let api: APIClient
    let pageSize: Int
    /// Pages read for one child in one catch-up before it is called endless (a server ignoring offset).
    let maxPages: Int
    let logger: Logger

    public init(store: Store, api: APIClient, pageSize: Int = 100, maxPages: Int = 2000, logger: Logger = Logger(label: "catch-up")) {
        self.store = store
        self.api = api
        self.pageSize = pageSize
        self.maxPages = maxPages
        self.logger = logger
    }

    public func run() async throws -> Report {
        // First: is this still the server the cache was filled from? (Throws a conflict when it is not.)
        if let note = try store.bindServer(try await api.identity()) { logger.notice("\(note)") }
        let children = try await api.children()
        var report = Report(children: children.count, fetched: 0, stored: 0)
        let rejectedBefore = try store.rejectedRows().count
        var cursors: [UUID: UUID] = [:]
        for child in children {
            let cursor = try store.catchUpCursor(child: child.id)?.lowercased
            let what = "GET /api/v1/children/\(child.id.lowercased)/transactions"
            var offset = 0
            var seen = Set<String>()
            var repeatedPages = 0
            for pageNumber in 1... {
                guard pageNumber <= maxPages else {
                    throw APIError(
                        .invalidResponse,
                        "\(what) did not end after \(maxPages) pages (\(offset) transactions): the server seems to ignore offset. Catch-up stopped; it is tried again later.")
                }
                let page = try await api.page(child: child.id, limit: pageSize, offset: offset)
                if page.isEmpty { break }  // the server has no more
                var fresh: [Transaction] = []
                var unreadable: [RejectedRow] = []
                var reachedCursor = false
                var new = 0
                for item in page {
                    if let id = item.id {
                        guard seen.insert(id).inserted else { continue }  // pages shifted by a new transaction
                        if id == cursor {
                            reachedCursor = true
                            break
                        }
                        if cursors[child.id] == nil, let uuid = UUID(uuidString: id) { cursors[child.id] = uuid }
                    }
                    new += 1
                    switch item {
                    case .transaction(let t): fresh.append(t)
                    case .unreadable(let row): unreadable.append(row)
                    }
                }
                // A whole page seen before: the server repeats itself. Twice more and it is not a shift.
                repeatedPages = new == 0 && !reachedCursor ? repeatedPages + 1 : 0
                if repeatedPages >= 3 {
                    throw APIError(
                        .invalidResponse,
                        "\(what) sent the same transactions again for offsets up to \(offset): the server seems to ignore offset. Catch-up stopped; it is tried again later.")
                }
                report.fetched += fresh.count
                report.stored += try store.storeCaughtUp(children: children, transactions: fresh.reversed(), rejected: unreadable, complete: false)
                if reachedCursor { break }
                offset += page.count
            }
        }
        // Balances as the server sees them now, not as at the start: events may have arrived meanwhile.
        let asked = Date()
        let latest = try await api.children()
        try store.storeCaughtUp(children: latest, transactions: [], cursors: cursors, balancesAskedAt: asked)
        let rejected = try store.rejectedRows()
        report.rejected = rejected.count - rejectedBefore
        if report.rejected > 0 {
            let named = rejected.prefix(report.rejected).map { "\($0.id): \($0.reason)" }.joined(separator: "; ")
            logger.warning(
                "\(report.rejected) transaction(s) from the server could not be stored and were set aside (`allowance-relay status` lists them): \(named)")
        }
        Counter(label: "allowance_relay_caught_up_transactions_total").increment(by: report.stored)
        logger.info("caught up", metadata: ["children": "\(report.children)", "transactions": "\(report.stored)"])
        return report
    }
}
