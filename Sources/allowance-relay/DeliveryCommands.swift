import AllowanceAPI
import ArgumentParser
import Config
import Core
import Foundation
import Relay
import RelayDaemon
import Store
import StoreContract

/// `allowance-relay deliveries list|retry|enable|purge`: the ledger of alerts owed to each sink.
struct DeliveriesCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "deliveries",
        abstract: "The alerts owed to each sink: pending, delivered, dead letters.",
        discussion: Help.reflow(
            """
            Every alert is one row per sink, kept until it is delivered or given up. Works offline and while
            `run` is running.

            Examples:
              allowance-relay deliveries list --state dead
              allowance-relay deliveries show dlv_0193…                # one delivery, its whole last error and alert
              allowance-relay deliveries list --sink family-chat --json | jq '.[].lastError'
              allowance-relay deliveries retry --sink family-chat      # all dead letters of a sink
              allowance-relay deliveries enable family-chat             # after a 410 switched it off
              allowance-relay deliveries purge --older-than 30          # delivered rows older than 30 days
            """),
        subcommands: [List.self, Show.self, Retry.self, Enable.self, Purge.self],
        defaultSubcommand: List.self)

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Deliveries, newest first.",
            discussion:
                "Examples:\n  allowance-relay deliveries list --state dead\n  allowance-relay deliveries list --sink family-chat --json"
        )
        @OptionGroup var options: CacheOptions
        @Option(help: "Only this sink's.") var sink: String?
        @Option(help: "Only in this state: pending, delivered, dead, merged, muted.") var state: Delivery.State?
        @Option(help: "How many.") var limit = 50

        func run() async throws {
            let opened = try await options.openRelayStore(readOnly: true)
            defer { opened.close() }
            let rows = try opened.relay.deliveries(sink: sink, state: state, limit: limit)
            let zone = options.tableZone()
            // A waiting row of a sink that fails or is switched off waits for its sink, whatever its own tries say.
            let (failing, off) = (try opened.relay.sinkHealth(), try opened.relay.disabledSinks())
            let why = { (d: Delivery) -> String? in
                guard d.isWaiting else { return nil }
                if let reason = off[d.sink] { return "sink switched off: \(reason)" }
                return failing[d.sink].map {
                    "sink failing since \(LocalTime.text($0.failingSince, zone)): \($0.lastError)"
                }
            }
            if options.json {
                options.emit(
                    .array(
                        rows.map { d in
                            guard case .object(let members) = d.json else { return d.json }
                            return .object(members + [("waitsFor", why(d).map { .string($0) } ?? .null)])
                        }))
                return
            }
            let table =
                [
                    [
                        "CREATED (\(options.zoneName(zone)))", "SINK", "KIND", "STATE", "TRIES", "NEXT TRY", "ID",
                        "LAST ERROR",
                    ]
                ]
                + rows.map { (d: Delivery) -> [String] in
                    [
                        LocalTime.cell(d.createdAt, zone), d.sink, d.kind.rawValue, d.state.rawValue,
                        String(d.attempts),
                        d.isWaiting ? (why(d) == nil ? LocalTime.cell(d.nextAttemptAt, zone) : "after the sink") : "-",
                        d.id,
                        Self.short(d.lastError ?? why(d)),
                    ]
                }
            print(Table.render(table, rightAligned: [4]))
            if rows.contains(where: { ($0.lastError?.count ?? 0) > Self.errorWidth }) {
                print("(errors cut short: `allowance-relay deliveries show ID` prints one whole)")
            }
        }

        static let errorWidth = 60

        /// The error's first words up to the width, cut at a word and marked, never in the middle of one.
        static func short(_ error: String?) -> String {
            guard let error, error.count > errorWidth else { return error ?? "" }
            let head = error.prefix(errorWidth)
            return String(head.lastIndex(of: " ").map { head[..<$0] } ?? head) + " …"
        }
    }

    struct Show: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "One delivery: its state, tries, next try, whole last error and the alert as stored.",
            discussion: "Example: allowance-relay deliveries show dlv_0193c0de-…")
        @OptionGroup var options: CacheOptions
        @Argument(help: "The delivery's id (see `deliveries list`).") var id: String

        func run() async throws {
            let opened = try await options.openRelayStore(readOnly: true)
            defer { opened.close() }
            guard let d = try opened.relay.delivery(id: id) else {
                throw CLIError(
                    "No delivery '\(id)' (`allowance-relay deliveries list` shows their ids).", code: Exit.dataError)
            }
            if options.json {
                options.emit(d.json)
                return
            }
            let alert = d.storedAlert
            let zone = options.tableZone()
            print(
                Table.render([
                    ["id", d.id], ["sink", d.sink], ["rule", d.rule], ["kind", d.kind.rawValue],
                    ["state", d.state.rawValue],
                    ["urgency", d.urgency.rawValue], ["tries", String(d.attempts)],
                    ["created", LocalTime.text(d.createdAt, zone)],
                    ["delivered", d.deliveredAt.map { LocalTime.text($0, zone) } ?? "-"],
                    ["next try", d.isWaiting ? LocalTime.text(d.nextAttemptAt, zone) : "-"],
                    ["last error", d.lastError ?? "-"], ["alert", alert.serialized],
                ]))
        }
    }

    /// Tells the running relay to send the waiting alerts now, ending its back-off; says what happened.
    static func told(_ opened: OpenedStore) -> String {
        tellTheRunningRelay(
            opened, shared: "every running replica sends them now (the shared database notifies them).",
            signalled: { "the running relay (pid \($0)) sends them now." }, none: "the relay sends them when it runs.")
    }

    struct Retry: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Queue dead letters again (one by id, or all of a sink's).",
            discussion:
                "Examples:\n  allowance-relay deliveries retry dlv_83c1...\n  allowance-relay deliveries retry --sink family-chat"
        )
        @OptionGroup var options: CacheOptions
        @Argument(help: "A delivery id (see `deliveries list`).") var id: String?
        @Option(help: "All dead letters of this sink.") var sink: String?

        func validate() throws {
            guard (id == nil) != (sink == nil) else {
                throw ValidationError("Give a delivery id or --sink, not both or neither.")
            }
        }

        func run() async throws {
            let opened = try await options.openRelayStore()
            defer { opened.close() }
            let count = try opened.relay.retryDeliveries(id: id, sink: sink, at: Date())
            guard count > 0 else { throw CLIError("No dead delivery matches \(id ?? "sink \(sink!)").") }
            print("\(count) delivery(ies) queued again; \(DeliveriesCommand.told(opened))")
        }
    }

    struct Enable: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Switch a sink back on after the server said it was gone (410).",
            discussion:
                "Example (after fixing its URL and `systemctl reload allowance-relay`): allowance-relay deliveries enable family-chat"
        )
        @OptionGroup var options: CacheOptions
        @Argument(help: "The sink's name.") var sink: String

        func run() async throws {
            let opened = try await options.openRelayStore()
            defer { opened.close() }
            guard try opened.relay.disabledSinks()[sink] != nil else {
                throw CLIError("The sink \(sink) is not switched off.")
            }
            try opened.relay.enableSink(sink, at: Date())
            print("Sink \(sink) is on again; \(DeliveriesCommand.told(opened))")
        }
    }

    struct Purge: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Delete finished deliveries older than N days.",
            discussion:
                "Examples:\n  allowance-relay deliveries purge --older-than 30\n  allowance-relay deliveries purge --older-than 90 --dead"
        )
        @OptionGroup var options: CacheOptions
        @Option(help: "Age in days.") var olderThan = 30
        @Flag(help: "Dead letters too.") var dead = false

        func run() async throws {
            let opened = try await options.openRelayStore()
            defer { opened.close() }
            let count = try opened.relay.purgeDeliveries(
                before: Date().addingTimeInterval(-Double(olderThan) * 86400), includingDead: dead)
            print("\(count) delivery row(s) deleted.")
        }
    }
}

/// `allowance-relay notify test --sink NAME`: one test alert, straight to the sink, and what came of it.
struct NotifyCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "notify", abstract: "Try the sinks.", subcommands: [Test.self], defaultSubcommand: Test.self)

    struct Test: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Send a test alert to a sink (or to every sink) and say what happened.",
            discussion: Help.reflow(
                """
                Sends directly (not through the ledger) and exits 0 when every destination tried accepted it.

                Examples:
                  allowance-relay notify test --config relay.yaml                     # every sink
                  allowance-relay notify test --config relay.yaml --sink family-chat
                  allowance-relay notify test --config relay.yaml --sink desktop --json
                """))

        @Option(
            name: .shortAndLong,
            help:
                "YAML config file with the sinks (default: ~/.config/allowance-relay/relay.yaml, then /etc/allowance-relay/relay.yaml)."
        )
        var config: String?
        @Option(help: "The sink's name (default: every sink).") var sink: String?
        @Flag(help: "Print JSON instead of a sentence.") var json = false

        func run() async throws {
            let file = ConfigSource.locate(config)
            let relay = try loadAlertSettings(ConfigSource.once(file: file))
            let names = relay.sinks.map(\.name)
            guard !names.isEmpty else {
                throw CLIError(
                    "\(file ?? "The configuration (no config file found)") defines no sinks (see config/reference.yaml, sinks:).",
                    code: Exit.dataError)
            }
            let targets: [SinkConfig]
            if let sink {
                guard let target = relay.sinksByName[sink] else {
                    let near = Suggest.closest(to: sink, in: names).map { " Did you mean \($0)?" } ?? ""
                    throw CLIError(
                        "No sink '\(sink)' in \(file ?? "the configuration"); its sinks are \(names.joined(separator: ", ")).\(near)",
                        code: Exit.dataError)
                }
                targets = [target]
            } else {
                targets = relay.sinks
            }
            var results: [(sink: SinkConfig, ok: Bool, said: String)] = []
            for target in targets {
                let outcome = await relay.sendTest(to: target, http: RelayCommand.http)
                let said: String =
                    switch outcome {
                    case .delivered: "delivered"
                    case .retry(let r, _), .throttled(let r, _), .disable(let r), .rejected(let r), .unavailable(let r):
                        r
                    }
                results.append((target, outcome == .delivered, said))
            }
            if json {
                let each = results.map { r -> JSONValue in
                    [
                        "sink": .string(r.sink.name), "type": .string(r.sink.kind.rawValue), "delivered": .bool(r.ok),
                        "result": .string(r.said),
                    ]
                }
                print((sink == nil ? .array(each) : each[0]).serialized)
            } else {
                for r in results {
                    print(
                        r.ok
                            ? "Sink \(r.sink.name) (\(r.sink.kind.rawValue)) accepted the test alert."
                            : "Sink \(r.sink.name) (\(r.sink.kind.rawValue)) did not take the test alert: \(r.said)")
                }
            }
            if !results.allSatisfy(\.ok) { throw ExitCode(1) }
        }
    }
}

extension Delivery.State: ExpressibleByArgument {}

extension Delivery {
    /// Still owed: its next try is worth showing.
    var isWaiting: Bool { state == .pending || state == .inFlight }

    /// The alert as stored (it names its currency), or its text when it cannot be read.
    var storedAlert: JSONValue { (try? JSONValue(parsing: alert.utf8)) ?? .string(alert) }

    /// What `deliveries list --json` and `deliveries show --json` print for one delivery.
    var json: JSONValue {
        [
            "id": .string(id), "sink": .string(sink), "rule": .string(rule), "kind": .string(kind.rawValue),
            "state": .string(state.rawValue), "urgency": .string(urgency.rawValue),
            "attempts": .number(String(attempts)),
            "createdAt": .string(iso(createdAt)), "deliveredAt": deliveredAt.map { .string(iso($0)) } ?? .null,
            "nextAttemptAt": .string(iso(nextAttemptAt)), "lastError": lastError.map { .string($0) } ?? .null,
            "event": storedAlert,
        ]
    }
}
