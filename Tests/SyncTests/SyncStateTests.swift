import AllowanceAPI
import Foundation
import Logging
import Store
import Sync
import TestSupport
import Testing

@Suite(.serialized, .timeLimit(.minutes(1))) struct SyncStateTests {
    /// A write that fails again and again: the state stays offline (said as such, not "offline -> offline"), and the
    /// next retry recorded for `status` is always the one ahead, never one already past.
    @Test func aStateThatStaysIsNotATransitionAndItsNextRetryIsKeptCurrent() async throws {
        try await withSimulator { base in
            let store = try Store.open(path: temporaryStorePath())
            let api = APIClient(baseURL: base, token: "store-token")
            _ = try await CatchUp(store: store, api: api).run()
            let log = LogLines()
            let sync = SyncCoordinator(store: store, api: api, logger: log.logger())
            _ = try store.enqueueTransaction(child: alice, amount: 1, type: .credit, description: "waits")
            try await post(base, "/_sim/rest?mode=503&count=1")
            _ = await sync.drainOutbox()
            let first = try #require(try store.syncStatus()?.nextRetry)
            try await Task.sleep(for: .milliseconds(1100))
            try await post(base, "/_sim/rest?mode=fail&count=1")
            _ = await sync.drainOutbox()
            let status = try #require(try store.syncStatus())
            #expect(status.phase == .offline && status.detail.contains("HTTP 500"))
            #expect(try #require(status.nextRetry) > first && status.nextRetry! > Date(), "\(status)")
            let lines = log.all.filter { $0.contains("sync:") }
            #expect(!lines.contains { $0.contains("offline -> offline") }, "\(lines)")
            #expect(
                lines.contains { $0.contains("sync: start -> offline") }
                    && lines.contains { $0.contains("sync: still offline") }, "\(lines)")
        }
    }
}
