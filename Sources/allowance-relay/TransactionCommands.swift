import AllowanceAPI
import ArgumentParser
import Core
import Foundation
import Store
import StoreContract

/// `allowance-relay transaction add`: a write that works with the backend down.
struct TransactionCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "transaction",
        abstract: "Record a transaction; it waits in the outbox until the backend is reachable.",
        subcommands: [AddTransactionCommand.self])
}

struct AddTransactionCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "add",
        abstract: "Add a credit or debit for a child (offline-safe).",
        discussion: Help.reflow(
            """
            The cache records it at once (balance included) and the running relay sends it, in order, with an
            Idempotency-Key, so a resend after a crash or a cut is applied by the server only once.

            Examples:
              allowance-relay transaction add --child Alice --amount 5.00 --type credit --description "Chores"
              allowance-relay transaction add --child 11111111-1111-4111-8111-111111111111 --amount 2.50 --type debit --description "Comic" --json
            """))

    @OptionGroup var options: CacheOptions
    @Option(help: "The child's first name or id.") var child: String
    // Unconditional: "-2" is read as the value (and refused with a word about --type debit), not as an option.
    @Option(parsing: .unconditional, help: "The amount, more than 0, e.g. 5.00 (at most two decimals).") var amount:
        String
    @Option(help: "credit or debit.") var type: String
    @Option(help: "What it was for.") var description: String

    func validate() throws {
        if amount.hasPrefix("-") {
            throw ValidationError(
                "--amount is the size of the amount, more than 0: for money going out, use --type debit (e.g. --amount \(amount.dropFirst()) --type debit)."
            )
        }
        guard let d = Decimal(string: amount, locale: Locale(identifier: "en_US_POSIX")), d > 0,
            amount.allSatisfy({ "0123456789.".contains($0) }),
            amount.split(separator: ".", omittingEmptySubsequences: false).count <= 2
        else { throw ValidationError("--amount must be a number more than 0 like 5.00, not '\(amount)'.") }
        if let cents = amount.split(separator: ".").dropFirst().first, cents.count > 2 {
            throw ValidationError(
                "--amount \(amount) has more than two decimals: amounts are in cents (e.g. \(amount.prefix { $0 != "." }).\(cents.prefix(2)))."
            )
        }
        guard ["credit", "debit"].contains(type.lowercased()) else {
            throw ValidationError("--type must be credit or debit.")
        }
        let trimmed = description.trimmingCharacters(in: .whitespaces)
        guard !trimmed.isEmpty, trimmed.count <= 500 else {
            throw ValidationError("--description must be 1 to 500 characters.")
        }
    }

    func run() async throws {
        let settings = try await options.settings()
        // On a shared store (store.url) the write waits there, and whichever replica claims it sends it.
        let opened = try await options.openRelayStore()
        defer { opened.close() }
        let store = opened.relay
        let match = try Children.find(child, in: try store.children())
        let (amount, type) = (
            Decimal(string: amount, locale: Locale(identifier: "en_US_POSIX"))!,
            type.lowercased() == "credit" ? TransactionType.credit : .debit
        )
        let entry: OutboxEntry
        do throws(StoreError) {
            entry = try store.enqueueTransaction(
                child: match.id, amount: amount, type: type,
                description: description.trimmingCharacters(in: .whitespaces),
                limit: settings.outboxLimit, at: Date())
        } catch {
            throw CLIError(error.message, code: Exit.dataError)
        }
        let balance = try store.children().first { $0.id == match.id }?.currentBalance ?? 0
        let relay = opened.file.flatMap(signalTheRunningRelay)  // it sends the write now, not at its next look
        if options.json {
            options.emit([
                "outbox": .number(String(entry.seq)), "idempotencyKey": .string(entry.idempotencyKey),
                "childId": .string(match.id.lowercased), "localBalance": Money.json(balance),
                "currency": .string(settings.currency), "state": "pending",
            ])
        } else if opened.file == nil {
            print(
                "Queued as outbox #\(entry.seq): \(Money.signed(entry.amount, entry.type)) for \(match.firstName) (balance before it \(Money.plain(balance)))."
            )
            print("A replica sends it as soon as the backend is reachable (`allowance-relay outbox list` shows it).")
        } else {
            print(
                "Queued as outbox #\(entry.seq): \(Money.signed(entry.amount, entry.type)) for \(match.firstName), local balance \(Money.plain(balance))."
            )
            print(
                relay == nil
                    ? "No relay runs on this database: the write goes when it starts and the backend is reachable."
                    : "The running relay (pid \(relay!)) sends it now if the backend is reachable (`allowance-relay status` shows what waits)."
            )
        }
    }
}

/// `allowance-relay outbox list|retry|drop`: the writes waiting for (or refused by) the backend.
struct OutboxCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "outbox",
        abstract: "List, retry or drop writes waiting for the backend.",
        subcommands: [List.self, Retry.self, Drop.self],
        defaultSubcommand: List.self)

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "The outbox, oldest first (sent ones included).",
            discussion:
                "Examples:\n  allowance-relay outbox list\n  allowance-relay outbox list --json | jq '.[] | select(.state == \"dead\")'"
        )
        @OptionGroup var options: CacheOptions

        func run() async throws {
            let opened = try await options.openRelayStore(readOnly: true)
            defer { opened.close() }
            let entries = try opened.relay.outbox()
            let children = try opened.relay.children()
            if options.json {
                let currency = try await options.settings().currency
                let names = Dictionary(children.map { ($0.id, $0.firstName) }, uniquingKeysWith: { a, _ in a })
                options.emit(
                    .array(
                        entries.map { e in
                            [
                                "seq": .number(String(e.seq)), "state": .string(e.state.rawValue),
                                "childId": .string(e.childId.lowercased),
                                "childName": names[e.childId].map { .string($0) } ?? .null,
                                "type": .string(e.type.rawValue),
                                "amount": Money.json(e.amount), "currency": .string(currency),
                                "description": .string(e.description),
                                "attempts": .number(String(e.attempts)),
                                "lastError": e.lastError.map { .string($0) } ?? .null,
                            ]
                        }))
                return
            }
            let names = Dictionary(children.map { ($0.id, $0.firstName) }, uniquingKeysWith: { a, _ in a })
            let rows =
                [["#", "STATE", "CHILD", "AMOUNT", "DESCRIPTION", "ATTEMPTS", "LAST ERROR"]]
                + entries.map { e in
                    [
                        String(e.seq), e.state.rawValue, names[e.childId] ?? e.childId.lowercased,
                        Money.signed(e.amount, e.type), e.description,
                        String(e.attempts), e.lastError ?? "",
                    ]
                }
            print(Table.render(rows, rightAligned: [0, 3, 5]))
        }
    }

    struct Retry: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Send a pending or rejected write at the next chance.",
            discussion: "Example: allowance-relay outbox retry 12")
        @OptionGroup var options: CacheOptions
        @Argument(help: "The outbox entry number (see `outbox list`).") var seq: Int64

        func run() async throws {
            let opened = try await options.openRelayStore()
            defer { opened.close() }
            do throws(StoreError) { try opened.relay.retryOutbox(seq, at: Date()) } catch {
                throw CLIError(error.message)
            }
            if opened.file == nil {
                print("Outbox #\(seq) is due now; a replica sends it now if the backend is reachable.")
            } else if let pid = opened.file.flatMap(signalTheRunningRelay) {
                print(
                    "Outbox #\(seq) is due now; the running relay (pid \(pid)) sends it now if the backend is reachable."
                )
            } else {
                print("Outbox #\(seq) is due now; it goes when the relay starts and the backend is reachable.")
            }
        }
    }

    struct Drop: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Give up a write that was not sent (its local effect is undone).",
            discussion: "Example: allowance-relay outbox drop 12")
        @OptionGroup var options: CacheOptions
        @Argument(help: "The outbox entry number (see `outbox list`).") var seq: Int64

        func run() async throws {
            let opened = try await options.openRelayStore()
            defer { opened.close() }
            do throws(StoreError) { try opened.relay.dropOutbox(seq, at: Date()) } catch {
                throw CLIError(error.message)
            }
            print("Outbox #\(seq) dropped.")
        }
    }
}
