import AllowanceAPI
import ArgumentParser
import Config
import Core
import Foundation
import Relay
import RelayDaemon
import Store
import StoreContract

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
                "history": history.map { h -> JSONValue in
                    ["transactions": .number(String(h.transactions)), "at": .string(iso(h.at))]
                } ?? .null,
                "database": .string(s.path), "databaseBytes": .number(String(s.fileBytes)),
                "walBytes": opened.file.map { .number(String($0.walBytes)) } ?? .null,
                "schema": .array(s.migrations.map { .string($0) }), "children": .number(String(s.children)),
                "transactions": .number(String(s.transactions)),
                "inboxRows": s.inboxRows.map { .number(String($0)) } ?? .null,
                "outboxWaiting": .number(String(s.outboxWaiting)), "outboxRejected": .number(String(s.outboxRejected)),
                "lastCatchUp": s.lastCatchUp.map { .string(iso($0)) } ?? .null,
                "lastContact": s.lastContact.map { .string(iso($0)) } ?? .null, "stale": .bool(stale),
                "sync": sync?.json ?? .null,
                "running": .bool(running),
                "hub": link.map { l -> JSONValue in
                    running
                        ? l.json
                        : [
                            "state": .string("stopped"), "since": .string(iso(l.since)),
                            "detail": .string(
                                running ? l.detail : "not running (last: \(l.state.rawValue), \(l.detail))"),
                            "connectionId": .null, "pid": .null, "transport": .null, "protocol": .null,
                        ]
                } ?? .null,
                "lastEvent": s.lastEvent.map { .string(iso($0)) } ?? .null,
                // Nothing to send and nothing under way (no delivery pending or in flight, no write waiting): what a
                // script or a test waits for before it checks that nothing came twice.
                "settled": .bool(
                    s.outboxWaiting == 0
                        && counts.values.allSatisfy { ($0["pending"] ?? 0) + ($0["in_flight"] ?? 0) == 0 }),
                "rejected": .array(
                    rejected.map { r in
                        [
                            "id": .string(r.id), "childId": r.childId.map { .string($0.lowercased) } ?? .null,
                            "reason": .string(r.reason), "at": .string(iso(r.at)),
                        ]
                    }),
                "deliveries": .object(
                    counts.keys.sorted().map { sink in
                        let c = counts[sink]!
                        // One casing for every key: a row an older version left in flight counts as pending.
                        var members: [(key: String, value: JSONValue)] = [
                            ("pending", .number(String((c["pending"] ?? 0) + (c["in_flight"] ?? 0)))),
                            ("delivered", .number(String(c["delivered"] ?? 0))),
                            ("dead", .number(String(c["dead"] ?? 0))),
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
                "\(link.state.rawValue) since \(local(link.since))"
                    + (link.connectionId.map { ", connection id \($0)" } ?? "")
                    + (link.state == .connected
                        ? link.transport.map { " over \($0) (\(link.hubProtocol ?? "json"))" } ?? "" : "")
                    + (link.state == .connected ? "" : ": \(link.detail)") + " (pid \(link.pid))"
            } else if let link {
                "not running (last: \(link.state.rawValue) since \(local(link.since)), \(link.detail))"
            } else {
                "never run"
            }
        let lines: [[String]] = [
            ["hub", hub],
            [
                "sync",
                sync.map {
                    "\($0.phase.rawValue) since \(local($0.since)): \($0.detail)"
                        + ($0.nextRetry.map { ", next try \(local($0)) (\(Self.fromNow($0)))" } ?? "")
                } ?? "never run",
            ],
            ["database", s.path + (replicas == nil ? "" : " (shared by replicas)")],
            [
                "size",
                ByteCountFormatter.string(fromByteCount: s.fileBytes, countStyle: .file)
                    + (opened.file.map {
                        " (write-ahead log \(ByteCountFormatter.string(fromByteCount: $0.walBytes, countStyle: .file)))"
                    } ?? ""),
            ],
            ["schema", "version \(s.migrations.count)"],
            ["children", String(s.children)],
            ["transactions", String(s.transactions)],
            ["outbox", "\(s.outboxWaiting) waiting, \(s.outboxRejected) rejected"],
            ["last event", s.lastEvent.map(local) ?? "none"],
            ["last catch-up", s.lastCatchUp.map(local) ?? "never"],
            [
                "history",
                history.map {
                    "\($0.transactions) transaction(s) taken by the first catch-up at \(local($0.at)) (relay.history)"
                } ?? "not taken yet",
            ],
            ["last contact", (s.lastContact.map(local) ?? "never") + (stale ? "  (stale)" : "")],
        ]
        // Rows from the server that were set aside: each with its reason, so the server's data can be fixed.
        let aside: [[String]] =
            rejected.prefix(10).map { ["set aside", "transaction \($0.id): \($0.reason)"] }
            + (rejected.count > 10
                ? [["set aside", "… and \(rejected.count - 10) more (status --json lists all)"]] : [])
        let names = Dictionary(try store.children().map { ($0.id, $0.firstName) }, uniquingKeysWith: { a, _ in a })
        let muted: [[String]] = mutes.map { m in
            [
                "muted",
                "\(names[m.childId] ?? m.childId.lowercased) on \(m.sink == Mute.everySink ? "every sink" : m.sink) until \(local(m.until))",
            ]
        }
        let routes: [[String]] =
            (routing?.rows ?? []).map { ["routes \($0[0])", $0[1]] }
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
    return [
        "sink \(sink)",
        "\(pending) pending, \(c["delivered", default: 0]) delivered, \(c["dead", default: 0]) dead\(muted)\(off)",
    ]
}
