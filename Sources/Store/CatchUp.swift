import AllowanceAPI
import Foundation
import Logging

/// Fetches what the cache missed (after a restart or any reconnect: a new hub connection lost what was sent
/// while down). Pages each child's transactions newest first until one the cache already holds; a
/// transaction created meanwhile only shifts the pages, so it is seen twice (and deduplicated), never missed.
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
        var missing: [Transaction] = []
        for child in children {
            var newestFirst: [Transaction] = []
            var offset = 0
            scan: while true {
                let page = try await api.transactions(child: child.id, limit: pageSize, offset: offset)
                for t in page {
                    if try store.hasTransaction(t.id) { break scan }
                    newestFirst.append(t)
                }
                if page.count < pageSize { break }
                offset += pageSize
            }
            missing += newestFirst.reversed()
        }
        let stored = try store.storeCaughtUp(children: children, transactions: missing)
        let report = Report(children: children.count, fetched: missing.count, stored: stored)
        logger.info("caught up", metadata: ["children": "\(report.children)", "transactions": "\(report.stored)"])
        return report
    }
}
