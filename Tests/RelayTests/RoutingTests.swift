import Config
import Relay
import Testing

/// The routing table `config check` and `status` print: what reaches each sink, and what reaches nothing.
@Suite struct RoutingTests {
    let sinks =
        "sinks:\n  chat:\n    type: discord\n    url: https://discord.com/api/webhooks/1/x\n  hook:\n    type: webhook\n    url: https://example.org/h\n"

    @Test func withoutRulesEverySinkGetsTheDefaultsAndNothingIsWarned() throws {
        let routing = Routing(try AlertSettings.parse(sinks, file: "t.yaml"))
        #expect(routing.routes.map(\.sink) == ["chat", "hook"])
        #expect(
            routing.routes.allSatisfy {
                $0.alerts.count == 1 && $0.alerts[0].hasPrefix("rule default: ")
                    && $0.alerts[0].contains("transaction.created")
            })
        #expect(routing.warnings.isEmpty)
    }

    /// A config with only a summary rule silently sent no transaction anywhere: now each gap is a warning.
    @Test func aSummaryRuleAloneWarnsThatNoTransactionGoesAnywhereAndNamesTheSinkThatGetsNothing() throws {
        let yaml = sinks + "rules:\n  - name: evening\n    summary: weekly on sunday at 18:00\n    to: [chat]\n"
        let routing = Routing(try AlertSettings.parse(yaml, file: "t.yaml"))
        #expect(routing.rows == [["chat", "rule evening: summary weekly on sunday at 18:00"], ["hook", "NOTHING"]])
        #expect(routing.warnings.count == 2)
        #expect(routing.warnings.contains { $0.hasPrefix("sink hook gets nothing") })
        #expect(routing.warnings.contains { $0.hasPrefix("no rule sends transaction.created") })
    }

    @Test func aFilteredRuleSaysItTakesOnlySome() throws {
        let yaml =
            sinks
            + "rules:\n  - event: [transaction.created, balance.updated]\n    child: Alice\n    to: [chat, hook]\n"
        let routing = Routing(try AlertSettings.parse(yaml, file: "t.yaml"))
        #expect(
            routing.routes.map(\.alerts)
                == Array(repeating: ["rule 1: balance.updated, transaction.created (only some)"], count: 2))
        #expect(routing.warnings.isEmpty)
    }
}
