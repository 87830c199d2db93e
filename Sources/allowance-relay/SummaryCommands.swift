import AllowanceAPI
import ArgumentParser
import Config
import Core
import Foundation
import Relay
import RelayDaemon

struct SummaryCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "summary", abstract: "The summaries the rules send, now.", subcommands: [Show.self],
        defaultSubcommand: Show.self)

    struct Show: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Print each child's summary of the period under way, as far as it has gone.",
            discussion: Help.reflow(
                """
                The period is the first summary rule's (or --rule's): since its last due time, in relay.time_zone. Without a
                summary rule it is today, since midnight. Nothing is sent.

                Examples:
                  allowance-relay summary show --config relay.yaml
                  allowance-relay summary show --config relay.yaml --child Alice --json
                  allowance-relay summary show --config relay.yaml --child Alice --chart alice.png

                --chart draws the child's balance over the period (each transaction's balance after it; the goals \
                still to buy as dashed lines) to a PNG file, as a summary with a chart shows it.
                """))

        @OptionGroup var options: CacheOptions
        @Option(help: "Only this child (a first name or an id).") var child: String?
        @Option(help: "The summary rule whose period and children to use (default: the first one).") var rule: String?
        @Option(help: "Also write the child's chart of the period to this PNG file (with --child).") var chart: String?

        func validate() throws {
            if chart != nil, child == nil { throw ValidationError("--chart draws one child: add --child NAME.") }
        }

        func run() async throws {
            let relay = try options.relayConfig()
            let opened = try await options.openRelayStore(readOnly: true)
            defer { opened.close() }
            let store = opened.relay
            var events = try { () throws(CLIError) in
                do { return try relay.currentSummaries(store: store, rule: rule) } catch {
                    throw CLIError("\(error)", code: Exit.dataError)
                }
            }()
            if let child {
                let match = try Children.find(child, in: try store.children())
                events = events.filter { $0.childId == match.id }
                if let chart, let event = events.first {
                    let picture = relay.chart(for: event)
                    do {
                        try Data(try picture.png()).write(to: URL(fileURLWithPath: chart), options: .atomic)
                    } catch {
                        throw CLIError("Cannot write the chart to \(chart): \(error)", code: Exit.ioError)
                    }
                }
            }
            if options.json {
                options.emit(.array(events.map { $0.json(currency: relay.formatting.currency) }))
                return
            }
            // As a plain-text sink would say it: the summary template, no markup.
            let plain = SinkConfig(name: "summary", kind: .webhook)
            for e in events {
                let m = relay.message(
                    id: "summary", kind: .summary, urgency: .normal, event: e, sink: plain, markup: false)
                print(m.text)
            }
            if events.isEmpty { print("No child to summarise (the rule names none the cache has).") }
        }
    }
}
