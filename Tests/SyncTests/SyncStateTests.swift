import AllowanceAPI
import Foundation
import Logging
import Store
import Sync
import Synchronization
import Testing

/// The lines a log reader sees, collected.
final class LogLines: Sendable {
    private let lines = Mutex<[String]>([])
    var all: [String] { lines.withLock { $0 } }

    func logger() -> Logger {
        var logger = Logger(label: "sync-test") { _ in Handler(sink: self) }
        logger.logLevel = .info
        return logger
    }

    struct Handler: LogHandler {
        let sink: LogLines
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .info
        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }
        func log(level: Logger.Level, message: Logger.Message, metadata: Logger.Metadata?, source: String, file: String, function: String, line: UInt) {
            sink.lines.withLock { $0.append("\(level) \(message)") }
        }
    }
}

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
            #expect(lines.contains { $0.contains("sync: start -> offline") } && lines.contains { $0.contains("sync: still offline") }, "\(lines)")
        }
    }
}
