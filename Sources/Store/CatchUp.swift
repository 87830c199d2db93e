import AllowanceAPI
import Foundation
import Logging

/// Fetches what the cache missed (after a restart or any reconnect: a new hub connection lost what was sent
/// while down). Pages each child's transactions newest first down to the child's cursor: the newest
/// transaction of the last completed catch-up. Not down to any transaction the cache holds, since a live event
/// may have been stored while an older one was skipped. A transaction created meanwhile only shifts the
/// pages, so it is seen twice (and deduplicated), never missed. No cursor (or one the server no longer has):
/// the whole history is read.
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
        let children = try await api.children()
        var fetched: [Transaction] = []
        var cursors: [UUID: UUID] = [:]
        for child in children {
            let cursor = try store.catchUpCursor(child: child.id)
            var newestFirst: [Transaction] = []
            var offset = 0
            scan: while true {
                let page = try await api.transactions(child: child.id, limit: pageSize, offset: offset)
                for t in page {
                    if t.id == cursor { break scan }
                    newestFirst.append(t)
                }
                if page.count < pageSize { break }
                offset += pageSize
            }
            if let newest = newestFirst.first { cursors[child.id] = newest.id }
            fetched += newestFirst.reversed()
        }
        let stored = try store.storeCaughtUp(children: children, transactions: fetched, cursors: cursors)
        let report = Report(children: children.count, fetched: fetched.count, stored: stored)
        logger.info("caught up", metadata: ["children": "\(report.children)", "transactions": "\(report.stored)"])
        return report
    }
}
