import AllowanceAPI
import ArgumentParser
import Config
import Foundation
import Relay
import RelayDaemon
import Core
import Store
import StoreContract

/// Options shared by the commands that read the local cache. They work offline and while `run` is running.
struct CacheOptions: ParsableArguments {
    @Option(
        name: .shortAndLong,
        help: "YAML config file (default: ~/.config/allowance-relay/relay.yaml, then /etc/allowance-relay/relay.yaml).")
    var config: String?

    @Flag(help: "Print JSON instead of a table.")
    var json = false

    @Flag(help: "Times in tables in UTC (as --json gives them) instead of the family's time zone.")
    var utc = false

    /// How a column title names the zone of its times.
    func zoneName(_ zone: TimeZone) -> String { utc ? "UTC" : zone.identifier }

    /// The config file, read once for the whole command: the settings, the relay's sections and the time zone
    /// all come from this one reading.
    var source: ConfigSource { ConfigSource.once(file: ConfigSource.locate(config)) }

    /// The file's values and the relay's sections, the whole file checked first as `config check` checks it: a
    /// broken file is refused by every command (each mistake once, at its line; exit 78), not only by those that
    /// read the broken part.
    func checked() throws -> (values: ConfigValues, relay: RelayConfig) {
        do throws(ConfigErrors) {
            let values = try source.values()
            var problems = values.unknownKeys()
            var relay = RelayConfig()
            do { _ = try RelaySettings.local(values) } catch { problems += error.all }
            do { relay = try RelayConfig.parse(values) } catch { problems += error.all }
            guard problems.isEmpty else { throw ConfigErrors(merging: problems) }
            return (values, relay)
        } catch {
            FileHandle.standardError.write(Data(error.report.utf8))
            throw ExitCode(78)
        }
    }

    /// The relay's part of the config file (sinks, rules, time zone).
    func relayConfig() throws -> RelayConfig {
        try checked().relay
    }

    /// The zone of the times in tables: relay.time_zone, else the system's; UTC with --utc. (The file was
    /// checked when the store was opened.)
    func tableZone() -> TimeZone {
        if utc { return TimeZone(identifier: "UTC")! }
        return (try? relayConfig().formatting.timeZone) ?? .current
    }

    func settings() async throws -> LocalSettings {
        try RelaySettings.local(try checked().values)
    }

    func openStore(readOnly: Bool = false) async throws -> Store {
        let local = try await settings()
        if let shared = local.sharedStore {
            // The local file is not where a replica keeps the family's data: reading it would show nothing, and a
            // write there would reach no replica.
            throw CLIError(
                "This command works on the SQLite store only (it maintains the file), and store.url points at the shared database \(shared). Every other command works on it.",
                code: Exit.unavailable)
        }
        let path = local.storePath
        guard FileManager.default.fileExists(atPath: path) else {
            throw CLIError("No database at \(path) yet: run `allowance-relay run` first (or set store.path).", code: Exit.unavailable)
        }
        do {
            return try Store.open(path: path, readOnly: readOnly)
        } catch {
            throw CLIError(error.description, code: Exit.ioError)
        }
    }


    func emit(_ value: JSONValue) {
        print(value.serialized)
    }
}

/// `--max-age-hours`, on the commands that flag stale data (and only there).
struct Staleness: ParsableArguments {
    @Option(help: "Data older than this many hours is flagged stale.")
    var maxAgeHours = 24.0

    func isStale(_ lastContact: Date?) -> Bool {
        guard let last = lastContact else { return true }
        return Date().timeIntervalSince(last) > maxAgeHours * 3600
    }
}

struct StatusCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status",
        abstract: "What the local cache holds and when it last heard from the server.",
        discussion: "Example: allowance-relay status --json | jq .lastContact")

    @OptionGroup var options: CacheOptions
    @OptionGroup var staleness: Staleness

    func run() async throws {
        let opened = try await options.openRelayStore(readOnly: true)
        defer { opened.close() }
        let store = opened.relay
        let s = try store.summary()
        let sync = try store.syncStatus()
        let link = try store.linkStatus()
        // A replica's link row is the live holder's (another machine's pid means nothing here).
        let replicas = try opened.shared?.replicas()
        let running = link.map { $0.state != .stopped && (replicas != nil || processIsAlive($0.pid)) } ?? false
        let stale = staleness.isStale(s.lastContact)
        let counts = try store.deliveryCounts()
        let disabled = try store.disabledSinks()
        let failing = try store.sinkHealth()
        let rejected = try store.rejectedRows()
        let history = try store.historyTaken()
        let mutes = try store.mutes(at: Date())
        let routing = (try? options.relayConfig()).map(Routing.init)
        if options.json {
            var json: JSONValue = [
                "history": history.map { h -> JSONValue in ["transactions": .number(String(h.transactions)), "at": .string(iso(h.at))] } ?? .null,
                "database": .string(s.path), "databaseBytes": .number(String(s.fileBytes)),
                "walBytes": opened.file.map { .number(String($0.walBytes)) } ?? .null,
                "schema": .array(s.migrations.map { .string($0) }), "children": .number(String(s.children)),
                "transactions": .number(String(s.transactions)), "inboxRows": s.inboxRows.map { .number(String($0)) } ?? .null,
                "outboxWaiting": .number(String(s.outboxWaiting)), "outboxRejected": .number(String(s.outboxRejected)),
                "lastCatchUp": s.lastCatchUp.map { .string(iso($0)) } ?? .null,
                "lastContact": s.lastContact.map { .string(iso($0)) } ?? .null, "stale": .bool(stale),
                "sync": sync?.json ?? .null,
                "running": .bool(running),
                "hub": link.map { l -> JSONValue in
                    running ? l.json : ["state": .string("stopped"), "since": .string(iso(l.since)), "detail": .string(running ? l.detail : "not running (last: \(l.state.rawValue), \(l.detail))"), "connectionId": .null, "pid": .null, "transport": .null, "protocol": .null]
                } ?? .null,
                "lastEvent": s.lastEvent.map { .string(iso($0)) } ?? .null,
                // Nothing to send and nothing under way (no delivery pending or in flight, no write waiting): what a
                // script or a test waits for before it checks that nothing came twice.
                "settled": .bool(s.outboxWaiting == 0 && counts.values.allSatisfy { ($0["pending"] ?? 0) + ($0["in_flight"] ?? 0) == 0 }),
                "rejected": .array(rejected.map { r in
                    [
                        "id": .string(r.id), "childId": r.childId.map { .string($0.lowercased) } ?? .null,
                        "reason": .string(r.reason), "at": .string(iso(r.at)),
                    ]
                }),
                "deliveries": .object(counts.keys.sorted().map { sink in
                    let c = counts[sink]!
                    // One casing for every key: a row an older version left in flight counts as pending.
                    var members: [(key: String, value: JSONValue)] = [
                        ("pending", .number(String((c["pending"] ?? 0) + (c["in_flight"] ?? 0)))),
                        ("delivered", .number(String(c["delivered"] ?? 0))), ("dead", .number(String(c["dead"] ?? 0))),
                        ("muted", .number(String(c["muted"] ?? 0))),
                    ]
                    members.append(("disabled", disabled[sink].map { .string($0) } ?? .null))
                    members.append(("failing", failing[sink].map(\.json) ?? .null))
                    return (sink, .object(members))
                }),
            ]
            if let routing, case .object(let members) = json {
                json = .object(
                    members + [
                        ("routing", .object(routing.routes.map { ($0.sink, .array($0.alerts.map { .string($0) })) })),
                        ("warnings", .array(routing.warnings.map { .string($0) })),
                    ])
            }
            if let replicas, case .object(let members) = json {
                json = .object(
                    members + [
                        ("linkHolder", replicas.first(where: \.holdsLink).map { .string($0.name) } ?? .null),
                        ("replicas", .array(replicas.map(\.json))),
                    ])
            }
            options.emit(json)
            return
        }
        let zone = options.tableZone()
        // To the second: a reconnect or a retry is seconds away, not minutes.
        let local = { (date: Date) in LocalTime.cell(date, zone) + " " + zone.identifier }
        let sinks: [[String]] = Set(counts.keys).union(failing.keys).sorted().flatMap { sink in
            [sinkLine(sink, counts[sink] ?? [:], disabled[sink])]
                + (failing[sink].map { [["", $0.sentence(since: local($0.failingSince))]] } ?? [])
        }
        let hub: String =
            if let link, running {
                "\(link.state.rawValue) since \(local(link.since))" + (link.connectionId.map { ", connection id \($0)" } ?? "")
                    + (link.state == .connected ? link.transport.map { " over \($0) (\(link.hubProtocol ?? "json"))" } ?? "" : "")
                    + (link.state == .connected ? "" : ": \(link.detail)") + " (pid \(link.pid))"
            } else if let link {
                "not running (last: \(link.state.rawValue) since \(local(link.since)), \(link.detail))"
            } else {
                "never run"
            }
        let lines: [[String]] = [
            ["hub", hub],
            ["sync", sync.map { "\($0.phase.rawValue) since \(local($0.since)): \($0.detail)" + ($0.nextRetry.map { ", next try \(local($0)) (\(Self.fromNow($0)))" } ?? "") } ?? "never run"],
            ["database", s.path + (replicas == nil ? "" : " (shared by replicas)")],
            [
                "size",
                ByteCountFormatter.string(fromByteCount: s.fileBytes, countStyle: .file)
                    + (opened.file.map { " (write-ahead log \(ByteCountFormatter.string(fromByteCount: $0.walBytes, countStyle: .file)))" } ?? ""),
            ],
            ["schema", "version \(s.migrations.count)"],
            ["children", String(s.children)],
            ["transactions", String(s.transactions)],
            ["outbox", "\(s.outboxWaiting) waiting, \(s.outboxRejected) rejected"],
            ["last event", s.lastEvent.map(local) ?? "none"],
            ["last catch-up", s.lastCatchUp.map(local) ?? "never"],
            ["history", history.map { "\($0.transactions) transaction(s) taken by the first catch-up at \(local($0.at)) (relay.history)" } ?? "not taken yet"],
            ["last contact", (s.lastContact.map(local) ?? "never") + (stale ? "  (stale)" : "")],
        ]
        // Rows from the server that were set aside: each with its reason, so the server's data can be fixed.
        let aside: [[String]] = rejected.prefix(10).map { ["set aside", "transaction \($0.id): \($0.reason)"] }
            + (rejected.count > 10 ? [["set aside", "… and \(rejected.count - 10) more (status --json lists all)"]] : [])
        let names = Dictionary(try store.children().map { ($0.id, $0.firstName) }, uniquingKeysWith: { a, _ in a })
        let muted: [[String]] = mutes.map { m in
            ["muted", "\(names[m.childId] ?? m.childId.lowercased) on \(m.sink == Mute.everySink ? "every sink" : m.sink) until \(local(m.until))"]
        }
        let routes: [[String]] = (routing?.rows ?? []).map { ["routes \($0[0])", $0[1]] }
            + (routing?.warnings ?? []).map { ["warning", $0] }
        print(Table.render(lines + aside + muted + sinks + routes))
        if let replicas {
            print("Replicas:")
            let rows =
                [["NAME", "HOST", "PID", "STATE", "STARTED", "LAST SEEN"]]
                + replicas.map { r in
                    [
                        r.name, r.host, String(r.pid), r.holdsLink ? "link holder" : r.alive ? "up" : "gone",
                        r.startedAt, r.seenAt,
                    ]
                }
            print(Table.render(rows, rightAligned: [2]))
        }
    }
}

extension SinkHealth {
    var json: JSONValue {
        ["since": .string(iso(failingSince)), "lastError": .string(lastError), "deadLettering": .bool(deadLettering)]
    }

    /// "FAILING since 2026-11-26 08:26:03 UTC (its alerts become dead letters): HTTP 400 ...", for the tables.
    func sentence(since: String) -> String {
        "FAILING since \(since)\(deadLettering ? " (its alerts become dead letters)" : ""): \(lastError)"
    }
}

extension StatusCommand {
    /// "in 12 s", "in 3 min", "12 s ago".
    static func fromNow(_ date: Date, now: Date = Date()) -> String {
        let seconds = Int(date.timeIntervalSince(now).rounded())
        let amount = abs(seconds) < 120 ? "\(abs(seconds)) s" : "\(abs(seconds) / 60) min"
        return seconds >= 0 ? "in \(amount)" : "\(amount) ago"
    }
}

/// Whether the daemon that wrote the link row is still running (EPERM: alive, another user's).
private func processIsAlive(_ pid: Int32) -> Bool {
    kill(pid, 0) == 0 || errno == EPERM
}

private func sinkLine(_ sink: String, _ c: [String: Int], _ disabled: String?) -> [String] {
    let pending = c["pending", default: 0] + c["in_flight", default: 0]
    let off = disabled.map { "; SWITCHED OFF: \($0)" } ?? ""
    let muted = c["muted", default: 0] > 0 ? ", \(c["muted", default: 0]) muted" : ""
    return ["sink \(sink)", "\(pending) pending, \(c["delivered", default: 0]) delivered, \(c["dead", default: 0]) dead\(muted)\(off)"]
}

struct BalancesCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "balances",
        abstract: "Each child's balance as last heard from the server.",
        discussion: "Example: allowance-relay balances --json")

    @OptionGroup var options: CacheOptions
    @OptionGroup var staleness: Staleness

    func run() async throws {
        let opened = try await options.openRelayStore(readOnly: true)
        defer { opened.close() }
        let stale = staleness.isStale(try opened.relay.contact().lastContact)
        let children = try opened.relay.children()
        if options.json {
            let currency = try await options.settings().currency
            options.emit(.array(children.map { c in
                [
                    "id": .string(c.id.lowercased), "name": .string("\(c.firstName) \(c.lastName)"),
                    "balance": Money.json(c.currentBalance), "currency": .string(currency), "stale": .bool(stale),
                ]
            }))
            return
        }
        let currency = try await options.settings().currency
        let rows = [["CHILD", "BALANCE", "CURRENCY"]] + children.map { ["\($0.firstName) \($0.lastName)", Money.plain($0.currentBalance), currency] }
        print(Table.render(rows, rightAligned: [1]))
        if stale { print("(stale: nothing from the server for over \(Int(staleness.maxAgeHours)) h)") }
    }
}

struct TransactionsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "transactions",
        abstract: "Cached transactions, newest first.",
        discussion: Help.reflow("""
            Examples:
              allowance-relay transactions --child Alice --limit 5
              allowance-relay transactions --since 7d
              allowance-relay transactions --since 2026-11-01 --limit 500
              allowance-relay transactions --json | jq '.[] | select(.type == "Debit")'
            """))

    @OptionGroup var options: CacheOptions

    @Option(help: "A child's first name or id.") var child: String?
    @Option(help: "How many (newest first).") var limit = 20
    @Option(help: "Only those created since: a date (2026-11-01), a time (2026-11-01T08:00:00Z) or an age (36h, 7d).")
    var since: String?

    func validate() throws {
        guard limit > 0 else { throw ValidationError("--limit must be positive.") }
        if let since, Self.parseSince(since) == nil {
            throw ValidationError("--since must be a date (2026-11-01), a time (2026-11-01T08:00:00Z) or an age (36h, 7d), not '\(since)'.")
        }
    }

    static func parseSince(_ text: String, now: Date = Date()) -> Date? {
        if let unit = text.last, let n = Double(text.dropLast()), n >= 0 {
            switch unit {
            case "m": return now.addingTimeInterval(-n * 60)
            case "h": return now.addingTimeInterval(-n * 3600)
            case "d": return now.addingTimeInterval(-n * 86400)
            default: break
            }
        }
        return ISODate.parse(text) ?? ISODate.parse(text + "T00:00:00Z")
    }

    func run() async throws {
        let opened = try await options.openRelayStore(readOnly: true)
        defer { opened.close() }
        let children = try opened.relay.children()
        var childId: UUID?
        if let child {
            childId = try Children.find(child, in: children).id
        }
        let names = Dictionary(children.map { ($0.id, $0.firstName) }, uniquingKeysWith: { a, _ in a })
        let sinceDate = since.flatMap { Self.parseSince($0) }
        let list = try opened.relay.transactions(child: childId, since: sinceDate, limit: limit)
        if options.json {
            let currency = try await options.settings().currency
            options.emit(.array(list.map { t in
                [
                    "id": .string(t.id.lowercased), "childId": .string(t.childId.lowercased),
                    "childName": names[t.childId].map { .string($0) } ?? .null, "type": .string(t.type.rawValue),
                    "amount": Money.json(t.amount), "balanceAfter": Money.json(t.balanceAfter), "currency": .string(currency),
                    "description": .string(t.description), "createdByName": .string(t.createdByName), "createdAt": .string(iso(t.createdAt)),
                ]
            }))
            return
        }
        let zone = options.tableZone()
        let rows = [["WHEN (\(options.zoneName(zone)))", "CHILD", "AMOUNT", "BALANCE", "DESCRIPTION"]] + list.map { t in
            [LocalTime.cell(t.createdAt, zone), names[t.childId].map(SafeText.forLog) ?? "?", Money.signed(t.amount, t.type), Money.plain(t.balanceAfter),
             SafeText.forLog(t.description)]
        }
        print(Table.render(rows, rightAligned: [2, 3]))
    }
}

/// A failure at run time (not a usage mistake): printed as "Error: ..." without the usage text, exit 1.
/// A command's failure, said on one line with the sysexits code that says its kind (`RelayCommand.main`).
struct CLIError: Error, CustomStringConvertible {
    let description: String
    let code: Int32
    init(_ description: String, code: Int32 = 1) {
        self.description = description
        self.code = code
    }
}

/// The exit codes every command uses (sysexits.h), as `--help` lists them.
enum Exit {
    /// A wrong argument (the parser's own errors are 64 too).
    static let usage: Int32 = 64
    /// Well-formed, but naming nothing that exists (no child Dave, no sink nope), or data that cannot be used.
    static let dataError: Int32 = 65
    /// What the command needs is not there yet (no database: run the relay first).
    static let unavailable: Int32 = 69
    /// The database cannot be read or written.
    static let ioError: Int32 = 74
    static let config: Int32 = 78
}

/// Tells the relay running on `store`, if one is, that another process changed the database (SIGUSR1: it reads the
/// mutes again and drains the outbox now). Its pid, or nil when none runs. Only a process that catches SIGUSR1 is
/// signalled: the pid may have been reused by another program since, or the daemon may run inside a program that
/// traps no signals for it (`Daemon.run(signals: nil)`), and SIGUSR1's default is to end the process. Such a relay
/// sees the change at its next outbox poll (60 s at most).
func signalTheRunningRelay(_ store: Store) -> Int32? {
    guard let link = try? store.linkStatus(), link.state != .stopped, link.pid > 0, SignalDisposition.caught(SIGUSR1, by: link.pid),
        kill(link.pid, SIGUSR1) == 0
    else { return nil }
    return link.pid
}

/// Tells the relay running on `opened` of a change this command made, and says so in the caller's words: on a file
/// by SIGUSR1 (`signalled` gets its pid, `none` when no relay catches it); on the shared database the change's own
/// notification reached every replica (`shared`).
func tellTheRunningRelay(_ opened: OpenedStore, shared: String, signalled: (Int32) -> String, none: String) -> String {
    guard let file = opened.file else { return shared }
    return signalTheRunningRelay(file).map(signalled) ?? none
}


/// Dates in the CLI's tables and JSON.
func iso(_ date: Date) -> String { Date.ISO8601FormatStyle().format(date) }

/// The relay's part of the configuration for a command that needs it; a broken file is reported as `config check`
/// reports it, exit 78.
func loadRelayConfig(_ source: ConfigSource) throws -> RelayConfig {
    do {
        return try RelayConfig.parse(try source.values())
    } catch {
        FileHandle.standardError.write(Data(ConfigErrors(error.all).report.utf8))
        throw ExitCode(78)
    }
}

/// Plain aligned columns for terminals.
enum Table {
    static func render(_ rows: [[String]], rightAligned: Set<Int> = []) -> String {
        guard let width = rows.map(\.count).max() else { return "" }
        let widths = (0..<width).map { col in rows.map { col < $0.count ? $0[col].count : 0 }.max() ?? 0 }
        return rows.map { row in
            row.enumerated().map { col, cell in
                let pad = String(repeating: " ", count: widths[col] - cell.count)
                return rightAligned.contains(col) ? pad + cell : cell + pad
            }.joined(separator: "  ").trimmingCharacters(in: .whitespaces)
        }.joined(separator: "\n")
    }
}
