import Alerts
import AllowanceAPI
import Config
import Foundation
import Relay
import Store
import Testing

let alice = UUID(uuidString: "11111111-1111-4111-8111-111111111111")!

func transaction(
    _ amount: String, _ type: TransactionType = .debit, after: String, description: String = "Stickers"
) -> Transaction {
    Transaction(
        id: UUID(), childId: alice, amount: Decimal(string: amount)!, type: type, description: description,
        balanceAfter: Decimal(string: after)!, createdAt: Date(timeIntervalSince1970: 1_795_000_000),
        createdByName: "Pat")
}

func created(_ t: Transaction, previous: String? = nil, caughtUp: Bool = false) -> RelayEvent {
    RelayEvent(
        kind: .transactionCreated, at: Date(), childId: t.childId, childName: "Alice", transaction: t,
        balance: t.balanceAfter,
        previousBalance: previous.flatMap { Decimal(string: $0) }, caughtUp: caughtUp)
}

@Suite struct TemplateTests {
    /// The rules' booleans take the same words as the settings' (`flag`): "1" is true in both.
    @Test func everyBooleanTakesTheSameWords() throws {
        for (word, expected) in [
            ("true", true), ("yes", true), ("on", true), ("1", true), ("false", false), ("no", false), ("off", false),
            ("0", false),
        ] {
            let config = try AlertSettings.parse(
                "sinks:\n  hook:\n    type: webhook\n    url: http://127.0.0.1:9/h\nrules:\n  - event: transaction.created\n    to: hook\n    digest: \(word)\n",
                file: "t.yaml")
            #expect(config.rules.first?.digest == expected, "digest: \(word)")
            #expect(ConfigBool.parse(word) == expected)
        }
        #expect(throws: ConfigErrors.self) {
            try AlertSettings.parse(
                "sinks:\n  hook:\n    type: webhook\n    url: http://127.0.0.1:9/h\nrules:\n  - event: transaction.created\n    to: hook\n    digest: maybe\n",
                file: "t.yaml")
        }
    }

    @Test func unknownPlaceholdersAndStrayBracesAreErrorsAtLoad() throws {
        #expect { try Template("{child} spent {amout}") } throws: { $0 is TemplateError }
        #expect { try Template("{child") } throws: { $0 is TemplateError }
        #expect { try Template("child}") } throws: { $0 is TemplateError }
        #expect(try Template("{{literal}} {child}").render(["child": "Alice"]) == "{literal} Alice")
    }

    @Test func valuesAreEscapedForTheDestinationButTheTemplateIsNot() throws {
        let t = try Template("*{child}*: {description}")
        let values = ["child": "Alice", "description": "<b>Fish & Chips</b>"]
        let slack = SinkConfig(name: "s", kind: .slack)
        let telegram = SinkConfig(name: "t", kind: .telegram)
        let desktop = SinkConfig(name: "d", kind: .desktop)
        #expect(t.render(values) { slack.escape($0, markup: true) } == "*Alice*: &lt;b&gt;Fish &amp; Chips&lt;/b&gt;")
        #expect(
            t.render(values) { telegram.escape($0, markup: true) } == "*Alice*: &lt;b&gt;Fish &amp; Chips&lt;/b&gt;")
        #expect(
            t.render(values) { desktop.escape($0, markup: false) } == "*Alice*: <b>Fish & Chips</b>",
            "no markup: plain text")
    }

    @Test func moneyFollowsCurrencyAndLocale() {
        let us = Formatting(currency: "USD", locale: "en_US")
        #expect(us.signed(Decimal(string: "5")!, credit: true) == "+$5.00")
        #expect(us.signed(Decimal(string: "19.99")!, credit: false) == "-$19.99")
        let de = Formatting(currency: "EUR", locale: "de_DE")
        #expect(de.money(Decimal(string: "1234.5")!).replacingOccurrences(of: "\u{00A0}", with: " ") == "1.234,50 €")
        // Exact, never through Double (which gave $12,345,678,901,234,568.00).
        #expect(us.money(Decimal(string: "12345678901234567.89")!) == "$12,345,678,901,234,567.89")
    }

    @Test func theDefaultTransactionTextSaysWhoWhatAndTheBalance() throws {
        let config = AlertSettings()
        let e = created(transaction("7.77", after: "13.16"))
        let m = config.message(
            id: "x", kind: .transactionCreated, urgency: .normal, event: e, sink: SinkConfig(name: "s", kind: .slack),
            markup: true)
        #expect(m.text == "Alice: -$7.77 for \"Stickers\" by Pat. Balance $13.16.")
        #expect(m.title == "Alice -$7.77")
    }
}

@Suite struct AlertSettingsTests {
    let file = "relay.yaml"

    @Test func aFullConfigLoads() throws {
        let yaml = """
            server:
              url: http://x
            relay:
              currency: EUR
              locale: de_DE
            sinks:
              audit:
                type: webhook
                url: https://hooks.example.org/allowance
                secret: whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw
              chat: discord://1234/abcd
              phone: ntfys://ntfy.sh/family-money
              popups:
                type: desktop
                quiet_hours: 22:00-07:00
                templates:
                  transaction.created: "{child} {amount}"
            rules:
              - name: big spending
                event: transaction.created
                type: debit
                amount_at_least: 10
                to: [chat, popups]
                urgency: critical
              - name: low
                event: balance.low
                child: Alice
                below: 5.00
                to: phone
            """
        let c = try AlertSettings.parse(yaml, file: file)
        #expect(c.sinks.map(\.name) == ["audit", "chat", "phone", "popups"])
        #expect(
            c.sinks[1].kind == .discord
                && c.sinks[1].url?.absoluteString == "https://discord.com/api/webhooks/1234/abcd")
        #expect(c.sinks[2].kind == .ntfy && c.sinks[2].url?.absoluteString == "https://ntfy.sh/family-money")
        #expect(c.sinks[1].rateLimit?.count == 1, "Discord's pace by default")
        #expect(c.sinks[3].quietHours != nil && c.sinks[3].templates[.transactionCreated]?.source == "{child} {amount}")
        #expect(c.rules.count == 2 && c.rules[0].urgency == .critical && c.rules[1].below == 5)
        #expect(c.formatting.currency == "EUR")
        #expect(!"\(c.sinks[0].secrets)".contains("MfKQ"), "secrets never print themselves")
    }

    @Test(arguments: [
        ("sinks:\n  chat:\n    type: slack\n    urll: https://x\n", 4, "sinks.chat.urll: is not a known key"),
        ("sinks:\n  chat:\n    type: skype\n", 3, "sinks.chat.type: type 'skype' is not a sink type"),
        ("sinks:\n  chat:\n    type: slack\n", 2, "sinks.chat: needs a url"),
        ("sinks:\n  chat: https://example.org\n", 2, "sinks.chat: is not a sink URL I know"),
        (
            "sinks:\n  chat: discord://1/2\ntemplates:\n  transaction.created: \"{child} {amout}\"\n", 4,
            "templates.transaction.created: bad template: unknown placeholder {amout}"
        ),
        (
            "sinks:\n  chat: discord://1/2\nrules:\n  - event: transaction.created\n    to: [chats]\n", 5,
            "rules[0].to: sends to 'chats', which is not a sink"
        ),
        (
            "sinks:\n  chat: discord://1/2\nrules:\n  - event: balance.low\n    to: chat\n", 4,
            "rules[0]: watches balance.low without a threshold"
        ),
        (
            "sinks:\n  hook:\n    type: webhook\n    url: https://x.example\n    secret: hunter2\n", 5,
            "sinks.hook.secret: a webhook secret must be whsec_ followed by base64"
        ),
        (
            "sinks:\n  chat:\n    type: slack\n    url: https://x.example\n    quiet_hours: 10pm-7am\n", 5,
            "sinks.chat.quiet_hours: quiet_hours '10pm-7am'"
        ),
        // Amounts as `transaction add` takes them: at most two decimals, no exponent.
        (
            "sinks:\n  chat: discord://1/2\nrules:\n  - event: balance.low\n    below: 5.001\n    to: chat\n", 5,
            "rules[0].below: '5.001' has more than two decimals"
        ),
        (
            "sinks:\n  chat: discord://1/2\nrules:\n  - event: transaction.created\n    amount_at_least: 1e3\n    to: chat\n",
            5,
            "rules[0].amount_at_least: '1e3' is not an amount"
        ),
        ("sinks:\n  chat: discord://1/2\nrules:\n  - event: balance.recovered\n    to: chat\n", 4, "rules[0].event:"),
    ])
    func mistakesNameFileLineKeyAndFix(_ yaml: String, _ line: Int, _ expected: String) {
        do {
            _ = try AlertSettings.parse(yaml, file: file)
            Issue.record("accepted:\n\(yaml)")
        } catch {
            #expect(error.all.count == 1 && error.all[0].line == line, "\(error)")
            let rest = error.description.drop { $0 != ":" }.dropFirst().drop { $0 != ":" }.dropFirst().drop {
                $0 != ":"
            }.dropFirst(2)
            #expect(error.description.hasPrefix("relay.yaml:\(line):") && rest.hasPrefix(expected), "\(error)")
            #expect(error.description.contains("Fix: "))
            #expect(!error.description.contains("hunter2"), "a secret is never repeated back")
        }
    }

    @Test func aSecretFileOthersCanReadIsRefused() throws {
        let dir = FileManager.default.temporaryDirectory.appending(path: "relay-secret-\(UUID())")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let path = dir.appending(path: "whsec").path
        try "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\n".write(toFile: path, atomically: true, encoding: .utf8)
        chmod(path, 0o644)
        let yaml = "sinks:\n  hook:\n    type: webhook\n    url: https://x.example\n    secret_file: \(path)\n"
        // Refused with the fix said once, as a command.
        #expect {
            try AlertSettings.parse(yaml, file: file)
        } throws: {
            "\($0)"
                == "\(file):5:18: sinks.hook.secret_file: The secret file of sink hook '\(path)' can be read by other users (mode 644). Fix: chmod 600 '\(path)'."
        }
        chmod(path, 0o600)
        #expect(try AlertSettings.parse(yaml, file: file).sinks[0].secrets.count == 1)
    }

    @Test func compactURLFormsBecomeSinks() throws {
        let c = try AlertSettings.parse(
            """
            sinks:
              a: tgram://123:abc/4567
              b: gotifys://push.example.org/AbCdEf
              c: jsons://hooks.example.org:8443/allowance
              d: matrixs://syt_token@matrix.example.org/!room:example.org
              e: slack://T1/B2/X3
            """, file: file)
        let s = c.sinksByName
        #expect(s["a"]?.kind == .telegram && s["a"]?.token?.value == "123:abc" && s["a"]?.chatId == "4567")
        #expect(
            s["b"]?.kind == .gotify && s["b"]?.url?.absoluteString == "https://push.example.org"
                && s["b"]?.token?.value == "AbCdEf")
        #expect(s["c"]?.kind == .webhook && s["c"]?.url?.absoluteString == "https://hooks.example.org:8443/allowance")
        #expect(s["d"]?.kind == .matrix && s["d"]?.room == "!room:example.org" && s["d"]?.token?.value == "syt_token")
        #expect(s["e"]?.url?.absoluteString == "https://hooks.slack.com/services/T1/B2/X3")
    }

    @Test func withoutRulesEverySinkGetsTheUsualAlerts() throws {
        let c = try AlertSettings.parse("sinks:\n  a: discord://1/2\n  b: slack://T/B/X\n", file: file)
        #expect(c.rules.count == 1 && c.rules[0].to == ["a", "b"] && c.rules[0].events.contains(.transactionCreated))
    }

    /// Quiet hours are the family's hours (`relay.time_zone`), not the machine's: a server in UTC keeps a family in
    /// Auckland quiet at 23:30 their time.
    @Test func quietHoursFollowTheFamilysTimeZone() throws {
        let yaml = """
            relay:
              time_zone: Pacific/Auckland
            sinks:
              chat:
                type: webhook
                url: https://hooks.example.org/allowance
                quiet_hours: 22:00-07:00
            rules:
              - event: transaction.created
                to: chat
                quiet_hours: 12:00-13:00
            """
        let c = try AlertSettings.parse(yaml, file: "t.yaml")
        let auckland = try #require(TimeZone(identifier: "Pacific/Auckland"))
        #expect(c.sinks[0].quietHours?.timeZone == auckland && c.rules[0].quietHours?.timeZone == auckland)
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = auckland
        let lateEvening = try #require(
            calendar.date(from: DateComponents(year: 2026, month: 11, day: 23, hour: 23, minute: 30)))
        let noon = try #require(
            calendar.date(from: DateComponents(year: 2026, month: 11, day: 23, hour: 12, minute: 15)))
        let sinkQuiet = try #require(c.sinks[0].quietHours)
        let ruleQuiet = try #require(c.rules[0].quietHours)
        #expect(sinkQuiet.contains(lateEvening) && !sinkQuiet.contains(noon))
        #expect(ruleQuiet.contains(noon) && !ruleQuiet.contains(lateEvening))
    }
}
