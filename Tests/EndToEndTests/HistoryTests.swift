import Alerts
import AllowanceAPI
import Config
import Foundation
import Relay
import Store
import Sync
import TestSupport
import Testing

/// A new database against a backend with a history: by default the relay starts from now (the history is stored,
/// nothing of it alerted); `relay.history: digest | all` for those who want it. Later catch-ups alert what was missed.
@Suite(.serialized, .timeLimit(.minutes(1))) struct HistoryTests {
    /// The simulator with `before` transactions made before the relay's database is, and a store planning with `mode`.
    func planned(_ mode: String?, before: Int, _ body: (Store, APIClient, URL) async throws -> Void) async throws {
        try await withSim { base in
            try await simPost(base, "/_sim/burst?count=\(before)")
            try await Task.sleep(for: .milliseconds(5))  // the database is made after them, on this clock
            let yaml =
                (mode.map { "relay:\n  history: \($0)\n" } ?? "")
                + "sinks:\n  chat:\n    type: slack\n    url: http://127.0.0.1:9/s\n  books:\n    type: webhook\n    url: http://127.0.0.1:9/b\n"
            let config = try AlertSettings.parse(yaml, file: "t.yaml")
            let store = try Store.open(
                path: FileManager.default.temporaryDirectory.appending(path: "history-\(UUID())/relay.sqlite").path)
            store.setPlanner(RulePlanner(rules: config.rules, sinks: config.sinksByName, history: config.history))
            try await body(store, APIClient(baseURL: base, token: "e2e-token"), base)
        }
    }

    @Test func aNewRelayStartsFromNowAndLaterCatchUpsAlertWhatWasMissed() async throws {
        try await planned(nil, before: 12) { store, api, base in
            #expect(try await CatchUp(store: store, api: api).run().stored == 12)
            #expect(try store.transactions(limit: 100).count == 12, "the history is stored")
            #expect(
                try store.deliveries(sink: "chat").isEmpty && store.deliveries(sink: "books").isEmpty,
                "and nothing of it alerted")
            #expect(try store.historyTaken()?.transactions == 12)
            // The relay was away for three transactions: those are alerted.
            try await simPost(base, "/_sim/burst?count=3")
            _ = try await CatchUp(store: store, api: api).run()
            #expect(try store.deliveries(sink: "books").filter { $0.kind == .transactionCreated }.count == 3)
            #expect(try store.deliveries(sink: "books").allSatisfy { try !$0.event.history && $0.event.caughtUp })
            #expect(try store.historyTaken()?.transactions == 12, "only the first catch-up is history")
        }
    }

    @Test func historyDigestFoldsItForEverySink() async throws {
        try await planned("digest", before: 9) { store, api, base in
            _ = try await CatchUp(store: store, api: api).run()
            for sink in ["chat", "books"] {
                let rows = try store.deliveries(sink: sink)
                #expect(rows.count == 9 && rows.allSatisfy { $0.digest }, "\(sink): \(rows.count)")
                #expect(try rows.allSatisfy { try $0.event.history })
            }
        }
    }

    @Test func historyAllAlertsEveryTransaction() async throws {
        try await planned("all", before: 7) { store, api, base in
            _ = try await CatchUp(store: store, api: api).run()
            #expect(try store.deliveries(sink: "books").count == 7)
            #expect(try store.deliveries(sink: "books").allSatisfy { !$0.digest })
            #expect(try store.deliveries(sink: "chat").allSatisfy { $0.digest }, "a chat folds a catch-up as always")
        }
    }

    /// A relay killed before its first catch-up completed, while the family went on: what was made after the
    /// database is owed, not history (a reliability scenario lost 13 alerts this way).
    @Test func transactionsMadeAfterTheDatabaseAreNotHistory() async throws {
        try await planned(nil, before: 5) { store, api, base in
            try await simPost(base, "/_sim/burst?count=4")  // the relay "ran" (its database exists), no catch-up yet
            _ = try await CatchUp(store: store, api: api).run()
            #expect(try store.transactions(limit: 100).count == 9)
            #expect(try store.deliveries(sink: "books").count == 4, "the four made after the database are alerted")
            #expect(try store.deliveries(sink: "books").allSatisfy { try !$0.event.history })
        }
    }

    @Test func aWrongHistoryModeIsAConfigError() {
        #expect { try AlertSettings.parse("relay:\n  history: some\n", file: "t.yaml") } throws: { error in
            "\(error)".contains("relay.history") && "\(error)".contains("is not one of none, digest, all")
        }
    }
}
