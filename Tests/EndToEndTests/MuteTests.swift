import Alerts
import AllowanceAPI
import Foundation
import SignalRProtocol
import Store
import TestSupport
import Testing

/// `allowance-relay mute list|add|remove` on a real database, and a running relay that takes a mute at once and
/// records what it held back as `muted` deliveries.
@Suite(.serialized, .timeLimit(.minutes(2))) struct MuteTests {
    let dir = FileManager.default.temporaryDirectory.appending(path: "relay-mute-\(UUID())")

    func cli(_ arguments: [String], _ env: [String: String]) async throws -> (code: Int32, output: String) {
        let p = try RelayProcess(env: env, arguments: arguments)
        return (await p.wait(), p.output)
    }

    @Test func addListAndRemoveInTheFamilysTime() async throws {
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let db = dir.appending(path: "relay.sqlite").path
        let alice = UUID()
        try Store.open(path: db).storeCaughtUp(
            children: [
                Child(id: alice, firstName: "Alice", lastName: "E", weeklyAllowance: 10, currentBalance: 25),
                Child(id: UUID(), firstName: "Bob", lastName: "E", weeklyAllowance: 5, currentBalance: 3),
            ], transactions: [])
        let file = dir.appending(path: "relay.yaml").path
        try "relay:\n  time_zone: Asia/Tokyo\nsinks:\n  chat: slack://T/B/X\n".write(
            toFile: file, atomically: true, encoding: .utf8)
        let env = ["ALLOWANCE_RELAY_STORE_PATH": db]
        let added = try await cli(["mute", "add", "alice", "--config", file, "--until", "2099-01-02 07:30"], env)
        #expect(added.code == 0, "\(added.output)")
        #expect(
            added.output.contains(
                "Muted Alice on every sink until 2099-01-02 07:30 Asia/Tokyo. It applies from the relay's next start."),
            "\(added.output)")
        let list = try await cli(["mute", "list", "--config", file, "--json"], env)
        let json = try JSONValue(parsing: Array(list.output.utf8))
        #expect(json.arrayValue?.count == 1)
        #expect(
            json.arrayValue?.first?["until"] == "2099-01-02T07:30:00+09:00",
            "ISO 8601 with the family's offset: \(list.output)")
        #expect(
            json.arrayValue?.first?["sink"] == .null
                && json.arrayValue?.first?["childId"]?.stringValue == alice.lowercased)
        let table = try await cli(["mute", "list", "--config", file], env)
        #expect(
            table.output.contains("Alice") && table.output.contains("every sink")
                && table.output.contains("2099-01-02 07:30 Asia/Tokyo"), "\(table.output)")
        let wrongSink = try await cli(["mute", "add", "Bob", "--config", file, "--sink", "chatt"], env)
        #expect(
            wrongSink.code == 65
                && wrongSink.output.contains("No sink 'chatt'; the sinks are chat. Did you mean chat?"),
            "\(wrongSink.output)")
        let past = try await cli(["mute", "add", "Bob", "--config", file, "--until", "2001-01-01 00:00"], env)
        #expect(past.code == 64 && past.output.contains("has passed already"), "\(past.output)")
        let removed = try await cli(["mute", "remove", "Alice", "--config", file], env)
        #expect(removed.code == 0 && removed.output.contains("Lifted 1 mute(s) of Alice."), "\(removed.output)")
        #expect(try await cli(["mute", "list", "--config", file], env).output.contains("No mutes"))
    }

    /// The relay runs; a mute added from another shell applies to the next alert about that child, which is recorded
    /// as `muted`; the other children's alerts go out.
    @Test func aRunningRelayTakesAMuteAtOnceAndRecordsWhatItHeldBack() async throws {
        let receiver = WebhookReceiver()
        try await receiver.run { hook in
            try await withSim { base in
                try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
                let db = dir.appending(path: "relay.sqlite").path
                let file = dir.appending(path: "relay.yaml").path
                try "sinks:\n  hook:\n    type: webhook\n    url: \(hook)/h\n".write(
                    toFile: file, atomically: true, encoding: .utf8)
                let env = simRelayEnv(base, store: db)
                let relay = try RelayProcess(env: env, arguments: ["run", "--config", file])
                #expect(await relay.waitFor("caught up"))
                let added = try await cli(["mute", "add", "Alice", "--config", file], env)
                #expect(added.output.contains("The running relay (pid"), "\(added.output)")
                #expect(await relay.waitFor("mutes read again: 1 running"), "\(relay.output.suffix(1000))")
                try await simTransaction(
                    base, child: "11111111-1111-4111-8111-111111111111", amount: "1.00", type: "Credit")
                try await simTransaction(
                    base, child: "22222222-2222-4222-8222-222222222222", amount: "2.00", type: "Credit")
                let store = try Store.open(path: db)
                #expect(await eventually(.seconds(10)) { receiver.received.count >= 1 })
                #expect(
                    await eventually(.seconds(10)) {
                        ((try? store.deliveries(sink: "hook", state: .muted)) ?? []).count == 1
                    })
                let muted = try #require(try store.deliveries(sink: "hook", state: .muted).first)
                #expect(muted.childId?.lowercased == "11111111-1111-4111-8111-111111111111")
                // Nothing is left to send: Alice's alert is muted for good, not waiting.
                #expect(
                    await eventually(.seconds(10)) {
                        (try? store.deliveries(sink: "hook", state: .pending))?.isEmpty == true
                    })
                #expect(receiver.received.count == 1, "only Bob's alert went out")
                #expect(receiver.received.first?.text.contains("22222222-2222-4222-8222-222222222222") == true)
                await relay.expectCleanStop()
            }
        }
    }
}
