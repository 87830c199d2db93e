import Alerts
import AllowanceAPI
import Foundation
import SignalRProtocol
import Store
import Testing

/// The exact words a user gets for each mistake on the command line, and the sysexits code that goes with it:
/// the binary as a user runs it, on a real database.
@Suite(.serialized) struct CLIMessageTests {
    let dir = FileManager.default.temporaryDirectory.appending(path: "relay-cli-\(UUID())")
    var db: String { dir.appending(path: "relay.sqlite").path }

    /// A cache that knows Alice and Bob, as a relay that ran once leaves it.
    func seeded() throws -> [String: String] {
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let store = try Store.open(path: db)
        try store.storeCaughtUp(
            children: [
                Child(id: UUID(), firstName: "Alice", lastName: "Example", weeklyAllowance: 10, currentBalance: 25.5),
                Child(id: UUID(), firstName: "Bob", lastName: "Example", weeklyAllowance: 5, currentBalance: 3),
            ], transactions: [])
        return ["ALLOWANCE_RELAY_STORE_PATH": db]
    }

    func run(_ arguments: [String], _ env: [String: String]) async throws -> (code: Int32, output: String) {
        let p = try RelayProcess(env: env, arguments: arguments)
        return (await p.wait(), p.output)
    }

    @Test func aChildThatIsNotThereIsNamedWithTheChildrenThatAre() async throws {
        let env = try seeded()
        let r = try await run(
            ["transaction", "add", "--child", "Dave", "--amount", "5", "--type", "credit", "--description", "x"], env)
        #expect(r.code == 65)
        #expect(
            r.output
                == "allowance-relay: No child 'Dave' in the cache; the children are Alice and Bob (a first name or an id).\n"
        )
        let near = try await run(["transactions", "--child", "Alise"], env)
        #expect(near.code == 65)
        #expect(
            near.output.hasSuffix("the children are Alice and Bob (a first name or an id). Did you mean Alice?\n"),
            "\(near.output)")
    }

    @Test func aNegativeAmountPointsAtTypeDebitAndAThirdDecimalAtCents() async throws {
        let env = try seeded()
        let negative = try await run(
            ["transaction", "add", "--child", "Alice", "--amount", "-2", "--type", "credit", "--description", "x"], env)
        #expect(negative.code == 64)
        #expect(
            negative.output.hasPrefix(
                "Error: --amount is the size of the amount, more than 0: for money going out, use --type debit (e.g. --amount 2 --type debit).\n"
            ),
            "\(negative.output)")
        let cents = try await run(
            ["transaction", "add", "--child", "Alice", "--amount", "1.255", "--type", "credit", "--description", "x"],
            env)
        #expect(cents.code == 64)
        #expect(
            cents.output.hasPrefix(
                "Error: --amount 1.255 has more than two decimals: amounts are in cents (e.g. 1.25).\n"),
            "\(cents.output)")
        #expect(try Store.open(path: db).outbox().isEmpty, "nothing queued")
    }

    @Test func optionsAppearOnlyOnTheCommandsTheyAffect() async throws {
        let env = try seeded()
        let r = try await run(
            [
                "transaction", "add", "--child", "Alice", "--amount", "1", "--type", "credit", "--description", "x",
                "--max-age-hours", "2",
            ], env)
        #expect(r.code == 64 && r.output.hasPrefix("Error: Unknown option '--max-age-hours'"), "\(r.output)")
        #expect(try await run(["balances", "--max-age-hours", "2"], env).code == 0)
    }

    @Test func aSinkThatIsNotThereIsNamedWithTheSinksThatAre() async throws {
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let config = dir.appending(path: "relay.yaml").path
        try "sinks:\n  chat: discord://1/2\n  hook:\n    type: webhook\n    url: https://x.example\n".write(
            toFile: config, atomically: true, encoding: .utf8)
        let r = try await run(["notify", "test", "--config", config, "--sink", "chta"], [:])
        #expect(r.code == 65)
        #expect(
            r.output == "allowance-relay: No sink 'chta' in \(config); its sinks are chat, hook. Did you mean chat?\n")
    }

    @Test func tablesCarryTheChildAndTheCurrency() async throws {
        var env = try seeded()
        #expect(
            try await run(
                [
                    "transaction", "add", "--child", "Bob", "--amount", "1.50", "--type", "debit", "--description",
                    "Candy",
                ], env
            ).code == 0)
        let outbox = try await run(["outbox", "list"], env)
        #expect(
            outbox.output.hasPrefix(
                "#  STATE    CHILD  AMOUNT  DESCRIPTION  ATTEMPTS  LAST ERROR\n1  pending  Bob     -1.50  Candy"),
            "\(outbox.output)")
        try "relay:\n  currency: EUR\n".write(
            toFile: dir.appending(path: "c.yaml").path, atomically: true, encoding: .utf8)
        env["ALLOWANCE_RELAY_RELAY_CURRENCY"] = "GBP"
        let balances = try await run(["balances"], env)
        #expect(
            balances.output.hasPrefix("CHILD          BALANCE  CURRENCY\nAlice Example    25.50  GBP\n"),
            "\(balances.output)")
    }

    /// Help paragraphs are wrapped by the parser to the terminal (80 columns here), not hard-wrapped at 100.
    @Test func helpFitsAnEightyColumnTerminal() async throws {
        for command in [
            ["--help"], ["transaction", "add", "--help"], ["config", "check", "--help"], ["deliveries", "--help"],
        ] {
            let r = try await run(command, ["COLUMNS": "80"])
            let long = r.output.split(separator: "\n").filter {
                $0.count > 80 && !$0.hasPrefix("USAGE:") && !$0.hasPrefix("  allowance-relay ")
            }
            #expect(r.code == 0 && long.isEmpty, "\(command): \(long)")
        }
        // A paragraph is filled to the width, not broken where the source text broke it (ragged before).
        let add = try await run(["transaction", "add", "--help"], ["COLUMNS": "80"]).output
        #expect(
            add.contains(
                """
                The cache records it at once (balance included) and the running relay sends it,
                in order, with an Idempotency-Key, so a resend after a crash or a cut is
                applied by the server only once.
                """), "\(add)")
    }

    /// One casing for JSON keys: camelCase everywhere in `status --json` (it mixed in `in_flight`).
    @Test func statusJSONKeysAreCamelCase() async throws {
        let env = try seeded()
        let json = try JSONValue(parsing: Array(try await RelayProcess.output(["status", "--json"], env: env).utf8))
        func keys(_ v: JSONValue) -> [String] {
            switch v {
            case .object(let members): members.flatMap { [$0.key] + keys($0.value) }
            case .array(let items): items.flatMap(keys)
            default: []
            }
        }
        let all = keys(json)
        #expect(!all.isEmpty && all.allSatisfy { !$0.contains("_") && $0.first?.isLowercase == true }, "\(all)")
    }

    @Test func noDatabaseYetIsUnavailable() async throws {
        let r = try await run(
            ["balances"], ["ALLOWANCE_RELAY_STORE_PATH": dir.appending(path: "none/relay.sqlite").path])
        #expect(r.code == 69)
        #expect(
            r.output.contains("No database at ")
                && r.output.contains("yet: run `allowance-relay run` first (or set store.path)."))
    }
}

/// `deliveries list` names the next try and cuts an error at a word; `deliveries show` prints it whole.
@Suite struct DeliveriesCLITests {
    @Test func aLongErrorIsCutAtAWordInTheListAndWholeInShow() async throws {
        let dir = FileManager.default.temporaryDirectory.appending(path: "relay-dlv-\(UUID())")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let db = dir.appending(path: "relay.sqlite").path
        let store = try Store.open(path: db)
        store.setPlanner(OneSink())
        let child = UUID()
        try store.storeCaughtUp(
            children: [Child(id: child, firstName: "Alice", lastName: "E", weeklyAllowance: 1, currentBalance: 1)],
            transactions: [])
        _ = try store.raise(RelayEvent(kind: .connectionLost, at: Date(), detail: "gone"))
        let d = try #require(try store.deliveries(sink: "hook").first)
        let error =
            "HTTP 500 from hooks.example.org: the receiving end answered with an error page that goes on and on and on"
        try store.record([(d.id, .retry(error: error, at: Date().addingTimeInterval(3600)))])
        let env = ["ALLOWANCE_RELAY_STORE_PATH": db]
        let list = try await RelayProcess.output(["deliveries", "list"], env: env)
        #expect(list.contains("NEXT TRY"))
        #expect(list.contains("HTTP 500 from hooks.example.org: the receiving end answered …\n"), "\(list)")
        #expect(list.contains("(errors cut short: `allowance-relay deliveries show ID` prints one whole)"))
        let show = try await RelayProcess.output(["deliveries", "show", d.id], env: env)
        #expect(show.contains("last error  \(error)\n"), "\(show)")
        let missing = try RelayProcess(env: env, arguments: ["deliveries", "show", "dlv_nope"])
        #expect(await missing.wait() == 65)
        #expect(
            missing.output
                == "allowance-relay: No delivery 'dlv_nope' (`allowance-relay deliveries list` shows their ids).\n")
    }
}

/// Every event to one sink named hook.
private struct OneSink: AlertPlanner {
    var currency: String? { "USD" }
    func plan(_ event: RelayEvent) -> [PlannedDelivery] {
        [PlannedDelivery(sink: "hook", rule: "all", kind: event.kind, urgency: .normal)]
    }
}
