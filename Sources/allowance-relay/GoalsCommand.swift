import AllowanceAPI
import ArgumentParser
import Core
import StoreContract

struct GoalsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "goals",
        abstract: "Each child's wish list as last read from the server, with how far the balance is towards each item.",
        discussion: Help.reflow(
            """
            The relay reads the wish lists after each catch-up, a few seconds after a balance moves, and every 30 \
            minutes; an item added in the app shows here after the next of these. Alerts: goal.reached (the balance \
            reached an item's price) and goal.purchased (an item was bought), routed by rules like any other.

            Examples:
              allowance-relay goals
              allowance-relay goals --child Alice --all
              allowance-relay goals --json | jq '.[] | select(.progress >= 75)'
            """))

    @OptionGroup var options: CacheOptions

    @Option(help: "A child's first name or id.") var child: String?
    @Flag(help: "Items bought already too.") var all = false

    func run() async throws {
        let opened = try await options.openRelayStore(readOnly: true)
        defer { opened.close() }
        let children = try opened.relay.children()
        let only = try child.map { (given) throws(CLIError) in try Children.find(given, in: children) }
        let balances = Dictionary(children.map { ($0.id, $0) }, uniquingKeysWith: { a, _ in a })
        let rows = try opened.relay.goals(child: only?.id).filter { all || !$0.item.isPurchased }
        func progress(_ g: GoalRow) -> Int { g.progress(balance: balances[g.item.childId]?.currentBalance ?? 0) }
        func state(_ g: GoalRow) -> String { g.item.isPurchased ? "bought" : g.reached ? "within reach" : "saving" }
        if options.json {
            options.emit(
                .array(
                    rows.map { g in
                        var o: [(key: String, value: JSONValue)] = [
                            ("id", .string(g.item.id.lowercased)), ("childId", .string(g.item.childId.lowercased)),
                            ("child", .string(balances[g.item.childId]?.firstName ?? "")),
                            ("name", .string(g.item.name)),
                            ("price", Money.json(g.item.price)), ("progress", .number(String(progress(g)))),
                            ("state", .string(state(g))), ("purchased", .bool(g.item.isPurchased)),
                        ]
                        if let url = g.item.url { o.append(("url", .string(url))) }
                        if let at = g.item.purchasedAt { o.append(("purchasedAt", .string(ISODate.string(at)))) }
                        return .object(o)
                    }))
            return
        }
        guard !rows.isEmpty else {
            print(
                only.map { "\($0.firstName) has no item on the wish list\(all ? "" : " still to buy")." }
                    ?? "No wish list item in the cache\(all ? "" : " still to buy") (the relay reads the lists while it runs)."
            )
            return
        }
        let table =
            [["CHILD", "ITEM", "PRICE", "PROGRESS", "STATE"]]
            + rows.map { g in
                [
                    balances[g.item.childId]?.firstName ?? g.item.childId.lowercased, g.item.name,
                    Money.plain(g.item.price),
                    "\(progress(g))%", state(g),
                ]
            }
        print(Table.render(table, rightAligned: [2, 3]))
    }
}
