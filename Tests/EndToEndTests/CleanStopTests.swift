import Foundation
import TestSupport
import Testing

/// What the relay binary leaves in its file at a clean stop, read with Python's sqlite3 rather than through the
/// store: the file alone must say every child's balance, to an older release (which reads `balance_minor`) and to
/// anyone reading the rows.
@Suite(.serialized, .timeLimit(.minutes(3))) struct CleanStopTests {
    struct ChildRow: Decodable {
        let id: String
        let balanceMinor: Int64
        let follows: Bool
    }

    /// The child table's rows as they stand in the file (read-only, beside a running relay if there is one).
    func childRows(_ path: String) async throws -> [ChildRow] {
        let script = """
            from json import dumps
            from sqlite3 import connect
            from sys import argv
            db = connect("file:" + argv[1] + "?mode=ro", uri=True)
            rows = db.execute("SELECT id, balance_minor, balance_follows FROM child").fetchall()
            print(dumps([{"id": i, "balanceMinor": b, "follows": f == 1} for i, b, f in rows]))
            """
        let out = try await runCommand(["python3", "-c", script, path])
        return try JSONDecoder().decode([ChildRow].self, from: Data(out.utf8))
    }

    /// While the relay runs, a burst that leaves a child's balance at its newest transaction writes nothing to the
    /// child's row, which says once that it follows (schema v27). The clean stop writes each such balance into its
    /// row: after it no row follows, and each says the server's balance.
    @Test func aCleanStopWritesEveryFollowingBalanceIntoItsRow() async throws {
        let hook = WebhookReceiver()
        try await hook.run { hookURL in
            try await withSim { base in
                let s = try await Scenario(base: base, hook: hookURL)
                let relay = try await s.startCaughtUp()
                try await simPost(base, "/_sim/burst?count=12")
                try await s.expectNothingLost(hook, "a burst before the stop", relay: relay)
                let running = try await childRows(s.storePath)
                let following = running.contains { $0.follows }
                #expect(following, "the burst left balances following: \(running)")

                await relay.expectCleanStop()
                let stopped = try await childRows(s.storePath)
                let server = try await ServerTruth.children(base)
                #expect(stopped.count == server.count)
                for child in server {
                    let row = stopped.first { $0.id == child.id.uuidString.lowercased() }
                    let cents = NSDecimalNumber(decimal: child.currentBalance * 100).int64Value
                    #expect(row?.balanceMinor == cents, "\(child.firstName): \(String(describing: row))")
                    #expect(row?.follows == false, "\(child.firstName) still follows after the stop")
                }
            }
        }
    }
}
