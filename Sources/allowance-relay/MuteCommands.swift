import AllowanceAPI
import ArgumentParser
import Config
import Core
import Foundation
import Relay
import RelayDaemon
import Store
import StoreContract

/// `allowance-relay mute list|add|remove`: the sinks muted per child ("Mute today" on a popup does the same).
struct MuteCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "mute",
        abstract: "List, add or lift mutes: a muted sink gets nothing but critical alerts about that child.",
        discussion: Help.reflow(
            """
            A muted alert is recorded, not sent: `deliveries list --state muted` shows it. Times are in relay.time_zone
            (else the system's). A running relay takes a change at once.

            Examples:
              allowance-relay mute add Alice                      # every sink, until midnight
              allowance-relay mute add Bob --sink popups --until 18:00
              allowance-relay mute list --json
              allowance-relay mute remove Alice
            """),
        subcommands: [List.self, Add.self, Remove.self], defaultSubcommand: List.self)

    /// What every mute command reads: the store, the children, the family's time zone and the sinks.
    struct Context {
        let opened: OpenedStore
        var store: any RelayStorage { opened.relay }
        let children: [Child]
        let zone: TimeZone
        let sinks: [String]

        init(_ options: CacheOptions, readOnly: Bool = false) async throws {
            let relay = try options.relayConfig()
            opened = try await options.openRelayStore(readOnly: readOnly)
            children = try opened.relay.children()
            zone = relay.formatting.timeZone
            sinks = relay.sinks.map(\.name)
        }

        func child(_ given: String) throws -> Child { try Children.find(given, in: children) }

        func sink(_ given: String?) throws -> String {
            guard let given else { return Mute.everySink }
            guard sinks.contains(given) else {
                let near = Suggest.closest(to: given, in: sinks).map { " Did you mean \($0)?" } ?? ""
                throw CLIError(
                    sinks.isEmpty
                        ? "No sink '\(given)': the configuration defines no sinks."
                        : "No sink '\(given)'; the sinks are \(sinks.joined(separator: ", ")).\(near)",
                    code: Exit.dataError)
            }
            return given
        }

        /// Tells a running relay that the mutes changed; says whether there was one.
        func tellTheRelay() -> String {
            tellTheRunningRelay(
                opened, shared: "Every running replica applies it now (the shared database notifies them).",
                signalled: { "The running relay (pid \($0)) applies it now." },
                none: "It applies from the relay's next start.")
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "The mutes still running, with when each ends.")
        @OptionGroup var options: CacheOptions

        func run() async throws {
            let c = try await Context(options, readOnly: true)
            defer { c.opened.close() }
            let mutes = try c.store.mutes(at: Date()).sorted { ($0.until, $0.sink) < ($1.until, $1.sink) }
            let name = { (id: UUID) in c.children.first { $0.id == id }?.firstName ?? id.lowercased }
            if options.json {
                options.emit(
                    .array(
                        mutes.map { m in
                            [
                                "childId": .string(m.childId.lowercased), "child": .string(name(m.childId)),
                                "sink": m.sink == Mute.everySink ? .null : .string(m.sink),
                                "until": .string(LocalTime.iso(m.until, c.zone)),
                            ]
                        }))
                return
            }
            guard !mutes.isEmpty else {
                print("No mutes: every sink gets every alert.")
                return
            }
            print(
                Table.render(
                    [["child", "sink", "until"]]
                        + mutes.map {
                            [
                                name($0.childId), $0.sink == Mute.everySink ? "every sink" : $0.sink,
                                LocalTime.text($0.until, c.zone),
                            ]
                        }))
        }
    }

    struct Add: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Mute a child's alerts (on one sink, or on all).")
        @OptionGroup var options: CacheOptions
        @Argument(help: "The child: a first name or an id.") var child: String
        @Option(help: "Only this sink (default: every sink).") var sink: String?
        @Option(
            help:
                "Until when: HH:MM (the next one), YYYY-MM-DD HH:MM, or an ISO 8601 time (default: the next midnight).")
        var until: String?

        func run() async throws {
            let c = try await Context(options)
            defer { c.opened.close() }
            let match = try c.child(child)
            let sinkName = try c.sink(sink)
            let now = Date()
            let end: Date
            if let until {
                guard let parsed = LocalTime.parse(until, after: now, in: c.zone) else {
                    throw CLIError(
                        "--until '\(until)' is not a time: use HH:MM, YYYY-MM-DD HH:MM or an ISO 8601 time.",
                        code: Exit.usage)
                }
                guard parsed > now else {
                    throw CLIError("--until \(LocalTime.text(parsed, c.zone)) has passed already.", code: Exit.usage)
                }
                end = parsed
            } else {
                end = MuteList.nextMidnight(after: now, in: c.zone)
            }
            try c.store.mute(Mute(sink: sinkName, childId: match.id, until: end))
            let told = c.tellTheRelay()
            if options.json {
                options.emit([
                    "childId": .string(match.id.lowercased),
                    "sink": sinkName == Mute.everySink ? .null : .string(sinkName),
                    "until": .string(LocalTime.iso(end, c.zone)),
                ])
            } else {
                print(
                    "Muted \(match.firstName) on \(sinkName == Mute.everySink ? "every sink" : sinkName) until \(LocalTime.text(end, c.zone)). \(told)"
                )
            }
        }
    }

    struct Remove: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Lift a child's mutes (on one sink, or all of them).")
        @OptionGroup var options: CacheOptions
        @Argument(help: "The child: a first name or an id.") var child: String
        @Option(help: "Only the mute on this sink (default: all of the child's).") var sink: String?

        func run() async throws {
            let c = try await Context(options)
            defer { c.opened.close() }
            let match = try c.child(child)
            let lifted = try c.store.unmute(child: match.id, sink: try sink.map { try c.sink($0) })
            let told = lifted > 0 ? " " + c.tellTheRelay() : ""
            if options.json {
                options.emit(["childId": .string(match.id.lowercased), "lifted": .number(String(lifted))])
            } else {
                print(
                    lifted == 0
                        ? "\(match.firstName) had no mute\(sink.map { " on \($0)" } ?? "")."
                        : "Lifted \(lifted) mute(s) of \(match.firstName).\(told)")
            }
        }
    }
}
