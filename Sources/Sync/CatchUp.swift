import AllowanceAPI
import Foundation
import Logging
import Metrics
import StoreContract

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
/// Every catch-up also checks that the server still has what the cache holds (`SyncStore.lostOnServer`) and that each
/// child's balance is the `balanceAfter` of its newest transaction: where either fails the server lost data, and the
/// catch-up throws a conflict (the cache is kept as it is). A child the server no longer lists was deleted there.
///
/// Each page is stored in its own transaction as it arrives (memory stays flat for long gaps; a crash
/// keeps what was stored); for a child with a cursor, once every child's pages passed the lost-data check (up to 5,000
/// transactions a child are held until then, so that nothing of a server that lost data is stored). The cursors move only when every child is done, so an interrupted catch-up is
/// simply run again.
public struct CatchUp: Sendable {
    public struct Report: Sendable, Equatable {
        public var children: Int
        public var fetched: Int
        public var stored: Int
        /// Rows the server sent that were quarantined for the first time.
        public var rejected: Int = 0
        /// Balances that did not add up with the cache on a first pass (read again before it counts as a conflict).
        var balanceMismatches: [BalanceMismatch] = []
    }

    let store: any SyncStore
    let api: APIClient
    let pageSize: Int
    /// Pages read for one child in one catch-up before it is called endless (a server ignoring offset).
    let maxPages: Int
    /// Transactions held in memory while paging looks for the cursor, before they are stored anyway.
    let holdLimit = 5_000
    let logger: Logger

    public init(
        store: any SyncStore, api: APIClient, pageSize: Int = 100, maxPages: Int = 2000,
        logger: Logger = Logger(label: "catch-up")
    ) {
        self.store = store
        self.api = api
        self.pageSize = pageSize
        self.maxPages = maxPages
        self.logger = logger
    }

    /// `traceParent` (tracing on): the catch-up's span, which the deliveries it plans continue.
    public func run(traceParent: String? = nil) async throws -> Report {
        // A balance that does not add up may be a transaction made on the server after its page was read: read once
        // more before calling it lost.
        var report = try await pass(confirming: [], storedBefore: 0, traceParent: traceParent)
        if report.balanceMismatches.isEmpty { return report }
        let second = try await pass(
            confirming: report.balanceMismatches, storedBefore: report.stored, traceParent: traceParent)
        report.fetched += second.fetched
        report.stored += second.stored
        report.rejected += second.rejected
        return report
    }

    /// `confirming`: what a first pass found not adding up; found again, unchanged, it is a conflict. `storedBefore`:
    /// what that first pass stored (part of the history a first catch-up takes).
    private func pass(confirming: [BalanceMismatch], storedBefore: Int, traceParent: String?) async throws -> Report {
        // First: is this still the server the cache was filled from? (Throws a conflict when it is not.)
        if let note = try store.bindServer(try await api.identity()) { logger.notice("\(note)") }
        let startedAt = Date()
        // The first catch-up of a new database reads the family's history: its alerts are marked so.
        let history = try !store.hasCaughtUp()
        let children = try await api.children()
        var report = Report(children: children.count, fetched: 0, stored: 0)
        let rejectedBefore = try store.rejectedRows().count
        var cursors: [UUID: UUID] = [:]
        var windows: [ReadWindow] = []
        var heldBack: [(children: [Child], fresh: [Transaction], unreadable: [RejectedRow])] = []
        for child in children {
            let cursorId = try store.catchUpCursor(child: child.id)
            let cursor = cursorId?.lowercased
            var window = ReadWindow(child: child.id, cursor: cursorId, startedAt: startedAt)
            let what = "GET /api/v1/children/\(child.id.lowercased)/transactions"
            var offset = 0
            var repeatedPages = 0
            // With a cursor, the new transactions are held until every child's pages are checked (at most
            // `holdLimit` a child): from a server that lost data, nothing is stored.
            var held: (fresh: [Transaction], unreadable: [RejectedRow]) = ([], [])
            for pageNumber in 1... {
                guard pageNumber <= maxPages else {
                    throw APIError(
                        .invalidResponse,
                        "\(what) did not end after \(maxPages) pages (\(offset) transactions): the server seems to ignore offset. Catch-up stopped; it is tried again later."
                    )
                }
                let page = try await api.page(child: child.id, limit: pageSize, offset: offset)
                if page.isEmpty { break }  // the server has no more
                var reachedCursor = false
                var new = 0
                for item in page {
                    if let id = item.id?.lowercased() {
                        if id == cursor {
                            reachedCursor = true
                            break
                        }
                        guard window.seen.insert(id).inserted else { continue }  // pages shifted by a new transaction
                        if cursors[child.id] == nil, let uuid = UUID(uuidString: id) { cursors[child.id] = uuid }
                    }
                    new += 1
                    switch item {
                    case .transaction(let t):
                        held.fresh.append(t)
                    case .unreadable(let row): held.unreadable.append(row)
                    }
                }
                // A whole page seen before: the server repeats itself. Twice more and it is not a shift.
                repeatedPages = new == 0 && !reachedCursor ? repeatedPages + 1 : 0
                if repeatedPages >= 3 {
                    throw APIError(
                        .invalidResponse,
                        "\(what) sent the same transactions again for offsets up to \(offset): the server seems to ignore offset. Catch-up stopped; it is tried again later."
                    )
                }
                window.cursorFound = reachedCursor
                if cursor == nil || held.fresh.count + held.unreadable.count >= holdLimit {
                    report.fetched += held.fresh.count
                    report.stored += try store.storeCaughtUp(
                        children: children, transactions: held.fresh.reversed(), rejected: held.unreadable,
                        cursors: [:],
                        complete: false, balancesAskedAt: nil, history: history, historyTaken: nil, at: Date(),
                        traceParent: traceParent)
                    held = ([], [])
                }
                if reachedCursor { break }
                offset += page.count
            }
            if !held.fresh.isEmpty || !held.unreadable.isEmpty {
                heldBack.append((children, held.fresh, held.unreadable))
            }
            // A child the cache held nothing of when this catch-up began cannot have lost anything: its ids need not
            // be kept for the check (a new database's first catch-up of a long history kept every one: 166 MiB at
            // a million transactions).
            if window.cursor == nil, try !store.hasTransactions(child: child.id, storedBefore: startedAt) {
                window.seen = []
            }
            windows.append(window)
        }
        // After every child's pages: a server handing out the same ids for other data is said as such first.
        if let lost = try store.lostOnServer(windows) { throw store.conflict(lost) }
        for (children, fresh, unreadable) in heldBack {
            report.fetched += fresh.count
            report.stored += try store.storeCaughtUp(
                children: children, transactions: fresh.reversed(), rejected: unreadable, cursors: [:], complete: false,
                balancesAskedAt: nil, history: history, historyTaken: nil, at: Date(), traceParent: traceParent)
        }
        // Balances as the server sees them now, not as at the start: events may have arrived meanwhile.
        let asked = Date()
        let latest = try await api.children()
        let mismatches = try store.balanceMismatches(latest, askedAt: asked)
        if confirming.isEmpty, !mismatches.isEmpty {
            logger.debug(
                "balances do not add up yet, reading once more: \(mismatches.map(\.evidence).joined(separator: "; "))")
            report.balanceMismatches = mismatches
            return report
        }
        // The same evidence twice: no transaction made between the reads explains it. Changed evidence (a burst
        // going on) is left to the next catch-up.
        let confirmed = mismatches.filter(confirming.contains)
        if !confirmed.isEmpty { throw store.conflict(BalanceMismatch.conflict(confirmed)) }
        for gone in try store.markRemoved(keeping: latest, at: Date()) {
            logger.notice(
                "\(gone.firstName) (\(gone.id.lowercased)) is no longer on the server (deleted there): removed from the cache's children"
            )
        }
        try store.storeCaughtUp(
            children: latest, transactions: [], rejected: [], cursors: cursors, complete: true, balancesAskedAt: asked,
            history: history, historyTaken: history ? storedBefore + report.stored : nil, at: Date(),
            traceParent: traceParent)
        if history {
            logger.notice(
                "first catch-up of a new database: \(storedBefore + report.stored) transaction(s) of the family's history stored (alerted as relay.history says; by default not at all)"
            )
        }
        let rejected = try store.rejectedRows()
        report.rejected = rejected.count - rejectedBefore
        if report.rejected > 0 {
            let named = rejected.prefix(report.rejected).map { "\($0.id): \($0.reason)" }.joined(separator: "; ")
            logger.warning(
                "\(report.rejected) transaction(s) from the server could not be stored and were set aside (`allowance-relay status` lists them): \(named)"
            )
        }
        Counter(label: "allowance_relay_caught_up_transactions_total").increment(by: report.stored)
        logger.info("caught up", metadata: ["children": "\(report.children)", "transactions": "\(report.stored)"])
        return report
    }
}
