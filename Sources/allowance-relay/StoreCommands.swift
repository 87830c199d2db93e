import ArgumentParser
import Core
import Foundation
import Store

/// `allowance-relay store prune`: retention on demand, and the file shrunk to what is left.
struct StoreCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "store", abstract: "Maintain the local database.", subcommands: [Prune.self])

    struct Prune: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract:
                "Delete old inbox rows, finished deliveries and (optionally) synced transactions, then shrink the file.",
            discussion: Help.reflow(
                """
                `run` already prunes inbox rows older than 7 days (and transactions per store.keep_transactions_days)
                at each start; this does it now, with the ages you give, and then VACUUMs the file, which SQLite
                never does by itself. Waiting outbox writes and pending deliveries are never deleted. Safe while
                `run` is running (its writes wait for the VACUUM, a few seconds at most for a family's data).

                Examples:
                  allowance-relay store prune                               # inbox > 7 days, deliveries > 30 days
                  allowance-relay store prune --transactions-days 365 --json
                """))

        @OptionGroup var options: CacheOptions
        @Option(help: "Inbox rows (the balances the hub sent, as they came) older than this many days.")
        var inboxDays = 7
        @Option(help: "Delivered deliveries (and dead letters with --dead) older than this many days.")
        var deliveriesDays = 30
        @Flag(help: "Dead letters too.") var dead = false
        @Option(help: "Synced transactions older than this many days (default: kept).") var transactionsDays: Int?

        func run() async throws {
            guard inboxDays >= 0, deliveriesDays >= 0, (transactionsDays ?? 0) >= 0 else {
                throw ValidationError("Ages are days, 0 or more.")
            }
            let store = try await options.openStore()
            let before = store.fileBytes
            let pruned = try store.prune(inboxDays: inboxDays, transactionDays: transactionsDays)
            let deliveries = try store.purgeDeliveries(
                before: Date().addingTimeInterval(-Double(deliveriesDays) * 86400), includingDead: dead)
            try store.vacuum()
            let after = store.fileBytes
            if options.json {
                options.emit([
                    "inbox": .number(String(pruned.inbox)), "transactions": .number(String(pruned.transactions)),
                    "deliveries": .number(String(deliveries)), "bytesBefore": .number(String(before)),
                    "bytesAfter": .number(String(after)),
                ])
            } else {
                let size = { (n: Int64) in ByteCountFormatter.string(fromByteCount: n, countStyle: .file) }
                print(
                    "Deleted \(pruned.inbox) inbox row(s), \(deliveries) delivery row(s), \(pruned.transactions) transaction(s); \(size(before)) -> \(size(after))."
                )
            }
        }
    }
}
