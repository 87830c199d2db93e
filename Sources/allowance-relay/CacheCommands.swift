import AllowanceAPI
import ArgumentParser
import Config
import Core
import Foundation
import Relay
import RelayDaemon
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
    func checked() throws -> (values: ConfigValues, relay: AlertSettings) {
        do throws(ConfigErrors) {
            let values = try source.values()
            var problems = values.unknownKeys()
            var relay = AlertSettings()
            do { _ = try RelaySettings.local(values) } catch { problems += error.all }
            do { relay = try AlertSettings.parse(values) } catch { problems += error.all }
            guard problems.isEmpty else { throw ConfigErrors(merging: problems) }
            return (values, relay)
        } catch {
            FileHandle.standardError.write(Data(error.report.utf8))
            throw ExitCode(78)
        }
    }

    /// The relay's part of the config file (sinks, rules, time zone).
    func relayConfig() throws -> AlertSettings {
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
            throw CLIError(
                "No database at \(path) yet: run `allowance-relay run` first (or set store.path).",
                code: Exit.unavailable)
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
            options.emit(
                .array(
                    children.map { c in
                        [
                            "id": .string(c.id.lowercased), "name": .string("\(c.firstName) \(c.lastName)"),
                            "balance": Money.json(c.currentBalance), "currency": .string(currency),
                            "stale": .bool(stale),
                        ]
                    }))
            return
        }
        let currency = try await options.settings().currency
        let rows =
            [["CHILD", "BALANCE", "CURRENCY"]]
            + children.map { ["\($0.firstName) \($0.lastName)", Money.plain($0.currentBalance), currency] }
        print(Table.render(rows, rightAligned: [1]))
        if stale { print("(stale: nothing from the server for over \(Int(staleness.maxAgeHours)) h)") }
    }
}

struct TransactionsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "transactions",
        abstract: "Cached transactions, newest first.",
        discussion: Help.reflow(
            """
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
            throw ValidationError(
                "--since must be a date (2026-11-01), a time (2026-11-01T08:00:00Z) or an age (36h, 7d), not '\(since)'."
            )
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
            options.emit(
                .array(
                    list.map { t in
                        [
                            "id": .string(t.id.lowercased), "childId": .string(t.childId.lowercased),
                            "childName": names[t.childId].map { .string($0) } ?? .null,
                            "type": .string(t.type.rawValue),
                            "amount": Money.json(t.amount), "balanceAfter": Money.json(t.balanceAfter),
                            "currency": .string(currency),
                            "description": .string(t.description), "createdByName": .string(t.createdByName),
                            "createdAt": .string(iso(t.createdAt)),
                        ]
                    }))
            return
        }
        let zone = options.tableZone()
        let rows =
            [["WHEN (\(options.zoneName(zone)))", "CHILD", "AMOUNT", "BALANCE", "DESCRIPTION"]]
            + list.map { t in
                [
                    LocalTime.cell(t.createdAt, zone), names[t.childId].map(SafeText.forLog) ?? "?",
                    Money.signed(t.amount, t.type), Money.plain(t.balanceAfter),
                    SafeText.forLog(t.description),
                ]
            }
        print(Table.render(rows, rightAligned: [2, 3]))
    }
}

/// The relay's part of the configuration for a command that needs it; a broken file is reported as `config check`
/// reports it, exit 78.
func loadAlertSettings(_ source: ConfigSource) throws -> AlertSettings {
    do {
        return try AlertSettings.parse(try source.values())
    } catch {
        FileHandle.standardError.write(Data(ConfigErrors(error.all).report.utf8))
        throw ExitCode(78)
    }
}
