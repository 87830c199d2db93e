import Alerts
import AllowanceAPI
import Config
import Foundation
import Relay
import TestSupport
import Testing

/// The one configuration model: the schema against the documented reference, the environment for every key,
/// and the suggestions for a misspelt word.
@Suite struct ConfigSchemaTests {
    /// Every key of the schema is documented in `config/reference.yaml`, under its section, written or commented
    /// out; and every key the reference writes is one the schema knows (it loads without a mistake). So the two
    /// cannot drift apart.
    @Test func theReferenceFileAndTheSchemaNameTheSameKeys() throws {
        let path = PythonPeer.root.appending(path: "config/reference.yaml").path
        let text = try String(contentsOfFile: path, encoding: .utf8)
        var section = ""
        var documented = Set<String>()
        var written = Set<String>()
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            if let first = line.first, first.isLetter, line.hasSuffix(":") { section = String(line.dropLast()) }
            // "  key: value" or "  # key: value" directly under a section (two spaces in).
            var body = line.dropFirst(0)
            guard body.hasPrefix("  "), !body.hasPrefix("   ") || body.hasPrefix("  # ") else { continue }
            body = body.dropFirst(2)
            if body.hasPrefix("# ") { body = body.dropFirst(2) }
            guard let colon = body.firstIndex(of: ":"), body[..<colon].allSatisfy({ $0.isLetter || $0 == "_" }) else {
                continue
            }
            documented.insert("\(section).\(body[..<colon])")
            if !line.hasPrefix("  #") { written.insert("\(section).\(body[..<colon])") }
        }
        let schema = Set(ConfigSchema.settings.map(\.key))
        #expect(
            schema.subtracting(documented).isEmpty,
            "in the schema, not in reference.yaml: \(schema.subtracting(documented).sorted())")
        let unknown = written.filter { !["sinks", "rules", "templates"].contains(String($0.split(separator: ".")[0])) }
            .subtracting(schema)
        #expect(unknown.isEmpty, "in reference.yaml, not in the schema: \(unknown.sorted())")
        #expect(ConfigValues(try ConfigFile.read(path), [:]).unknownKeys().isEmpty)
    }

    /// A key left unset reads as the schema's default, and that default written out reads the same: the defaults the
    /// reference documents (the figures here are the manual's, not read from the schema).
    @Test func anUnsetKeyIsItsDocumentedDefaultAndTheDefaultWrittenOutReadsTheSame() async throws {
        let server = ["ALLOWANCE_RELAY_SERVER_URL": "http://127.0.0.1:5000", "STATE_DIRECTORY": "/tmp/state"]
        var written = server
        for setting in ConfigSchema.settings {
            if let value = setting.defaultValue { written[setting.environmentVariable] = value }
        }
        for environment in [server, written] {
            let settings = try await RelaySettings.load(ConfigValues(nil, environment))
            #expect(
                settings.hubPath == "/hubs/family" && settings.hubProtocol == .json
                    && settings.transports == [.webSockets, .serverSentEvents, .longPolling])
            #expect(
                settings.maxResponseBytes == 8 * 1024 * 1024 && settings.storeDurability == .full
                    && settings.logLevel == "info" && settings.logFormat == .text)
            #expect(settings.unhealthyAfter == 15 * 60 && settings.serviceName == "allowance-relay")
            #expect(!settings.accessTokenInQuery && !settings.skipNegotiation && !settings.insecureTLS)
            #expect(
                settings.local.outboxLimit == 100 && settings.local.outboxMaxAttempts == 10
                    && settings.local.outboxMaxAgeDays == 7)
            #expect(settings.local.currency == "USD" && settings.local.keepTransactionsDays == nil)
            let alerts = try AlertSettings.parse(ConfigValues(nil, environment))
            #expect(alerts.connectionLostAfter == 5 * 60 && alerts.history == .none)
            #expect(alerts.formatting.currency == "USD" && alerts.formatting.locale == "en_US")
        }
        let bare = AlertSettings()
        #expect(bare.connectionLostAfter == 5 * 60 && bare.formatting.currency == "USD" && bare.sinks.isEmpty)
    }

    /// A choice's allowed values are its enum's cases: the schema says what the reader accepts.
    @Test func aChoiceAllowsExactlyItsEnumsCases() throws {
        let byKey = Dictionary(uniqueKeysWithValues: ConfigSchema.settings.map { ($0.key, $0) })
        #expect(byKey["store.durability"]?.type == "full|normal")
        #expect(byKey["relay.history"]?.type == "none|digest|all")
        #expect(byKey["server.hub_protocol"]?.type == "json|messagepack")
        #expect(byKey["server.transports"]?.defaultValue == "[websockets, server_sent_events, long_polling]")
        #expect(throws: ConfigErrors.self) {
            try AlertSettings.parse(ConfigValues(nil, ["ALLOWANCE_RELAY_RELAY_HISTORY": "some"]))
        }
    }

    /// `relay.*` keys come from the environment too, as the reference promises for every key.
    @Test func relayKeysComeFromTheEnvironmentToo() throws {
        let yaml = "relay:\n  currency: USD\nsinks:\n  chat: discord://1/2\n"
        #expect(try AlertSettings.parse(yaml, file: "r.yaml").formatting.currency == "USD")
        let env = ["ALLOWANCE_RELAY_RELAY_CURRENCY": "eur", "ALLOWANCE_RELAY_RELAY_CONNECTION_LOST_MINUTES": "2"]
        let config = try AlertSettings.parse(yaml, file: "r.yaml", environment: env)
        #expect(config.formatting.currency == "EUR" && config.connectionLostAfter == 120)
        #expect {
            try AlertSettings.parse(yaml, file: "r.yaml", environment: ["ALLOWANCE_RELAY_RELAY_CURRENCY": "EURO"])
        } throws: {
            "\($0)"
                == "environment: ALLOWANCE_RELAY_RELAY_CURRENCY: 'EURO' is not a 3-letter ISO 4217 code. Fix: e.g. USD, EUR, GBP."
        }
    }

    /// Each sink, rule and template is read on its own: three mistakes in three entries are three errors.
    @Test func everyMistakeOfTheRelaysSectionsIsReported() {
        let yaml = """
            sinks:
              a:
                type: webhok
              b: discord://1/2
            templates:
              transaction.create: "{child}"
            rules:
              - event: transaction.created
                to: [c]

            """
        #expect {
            try AlertSettings.parse(yaml, file: "r.yaml")
        } throws: {
            ($0 as? ConfigErrors)?.all.map(\.description) == [
                "r.yaml:3:11: sinks.a.type: type 'webhok' is not a sink type. Fix: did you mean webhook?",
                "r.yaml:6:3: templates.transaction.create: 'transaction.create' is not an alert kind. Fix: did you mean transaction.created? (add .title for the title).",
                "r.yaml:9:9: rules[0].to: sends to 'c', which is not a sink. Fix: define it under sinks: (known: a, b).",
            ]
        }
    }

    /// One mistake is one error: a sink whose own key is wrong is reported at that key, and the rule that sends to
    /// it is not a second error (it was "not a sink (known: )").
    @Test func aBrokenSinkIsOneErrorNotACascade() {
        let yaml =
            "sinks:\n  hook:\n    type: webhook\n    url: https://h.example.org/x\n    concurrency: yes\nrules:\n  - event: transaction.created\n    to: hook\n"
        #expect {
            try AlertSettings.parse(yaml, file: "r.yaml")
        } throws: {
            let all = ($0 as? ConfigErrors)?.all ?? []
            return all.count == 1 && all[0].key == "sinks.hook.concurrency" && all[0].line == 5
        }
    }

    /// A value from the environment for a sink the file does not have would be silently ignored: it is an error.
    @Test func anEnvironmentVariableNamingNoSinkIsAnError() {
        let yaml = "sinks:\n  hook:\n    type: webhook\n    url: https://h.example.org/x\n"
        #expect(throws: Never.self) {
            try AlertSettings.parse(
                yaml, file: "r.yaml", environment: ["ALLOWANCE_RELAY_SINKS_HOOK_URL": "https://x.org/y"])
        }
        #expect {
            try AlertSettings.parse(
                yaml, file: "r.yaml", environment: ["ALLOWANCE_RELAY_SINKS_HOK_URL": "https://x.org/y"])
        } throws: {
            ($0 as? ConfigErrors)?.all.map(\.description)
                == [
                    "environment: ALLOWANCE_RELAY_SINKS_HOK_URL: names no sink of the configuration. Fix: the sinks are hook (e.g. ALLOWANCE_RELAY_SINKS_HOOK_URL)."
                ]
        }
    }

    /// An unclosed quote is reported where it opens, not on a line past the end of the file.
    @Test func anUnclosedQuoteIsReportedWhereItOpens() {
        let yaml = "server:\n  url: \"http://x\nstore:\n  path: /tmp/a.sqlite\nlog:\n  level: info\n  format: text\n"
        #expect {
            try ConfigFile.parse(yaml, path: "q.yaml")
        } throws: {
            let e = ($0 as? ConfigErrors)?.all.first
            return e?.line == 2 && e?.column == 8 && e?.message.contains("quoted scalar") == true
        }
    }

    /// A mangled scheme gets the URL it was meant to be, not the scheme glued in front of it.
    @Test func aMangledSchemeIsPutRight() {
        #expect(URLFix.suggest("htp//host.example.org") == "http://host.example.org")
        #expect(URLFix.suggest("https:/host.example.org/x") == "https://host.example.org/x")
        #expect(URLFix.suggest("htps://host") == "https://host")
        #expect(URLFix.suggest("127.0.0.1:5000") == "http://127.0.0.1:5000")
        #expect(URLFix.suggest("user:secret@host") == nil, "never a password echoed")
    }

    @Test(arguments: ["demo.yaml", "family-server.yaml", "desktop.yaml", "both.yaml", "reference.yaml"])
    func theExampleConfigsLoad(_ name: String) async throws {
        let file = PythonPeer.root.appending(path: "config/\(name)").path
        // The examples name secret files that exist only on a real server: the environment stands in for them.
        // (Only for the sinks each example has: a variable naming no sink is a mistake.)
        let env =
            [
                "family-server.yaml": [
                    "ALLOWANCE_RELAY_SINKS_FAMILY_CHAT_URL": "https://discord.com/api/webhooks/1/x",
                    "ALLOWANCE_RELAY_SINKS_BOOKKEEPING_SECRET": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
                ],
                "both.yaml": ["ALLOWANCE_RELAY_SINKS_FAMILY_CHAT_URL": "https://hooks.slack.com/services/T/B/X"],
            ][name] ?? [:]
        let settings = try await RelaySettings.load(file: file, environment: env)
        let relay = try AlertSettings.load(file: file, environment: env)
        // What each example is for, as read: its sinks by kind, its rules, and the settings it is about.
        let sinks = Dictionary(uniqueKeysWithValues: relay.sinks.map { ($0.name, $0.kind.rawValue) })
        switch name {
        case "demo.yaml":
            #expect(sinks == ["demo-hook": "webhook"])
            #expect(
                settings.serverURL.absoluteString == "http://127.0.0.1:5080"
                    && settings.storePath.hasSuffix(".build/demo/relay.sqlite"))
        case "family-server.yaml":
            #expect(sinks == ["family-chat": "discord", "bookkeeping": "webhook"])
            #expect(relay.rules.count == 4 && relay.formatting.currency == "USD")
            #expect(relay.sinksByName["family-chat"]?.quietHours != nil && settings.statusListen?.port == 9464)
        case "desktop.yaml":
            #expect(sinks == ["popups": "desktop"])
            #expect(relay.rules.count == 2 && settings.email == "parent@example.org")
        case "both.yaml":
            #expect(sinks == ["popups": "desktop", "family-chat": "slack", "phones": "ntfy"])
            #expect(relay.rules.count == 5 && relay.formatting.currency == "EUR")
        default:
            // The reference documents every key in comments: it configures what an empty file does.
            let empty = try AlertSettings.parse("{}", file: "empty.yaml")
            #expect(sinks.isEmpty && relay.rules.count == empty.rules.count)
        }
    }

    /// What `install.sh --user` installs: one popup per transaction carrying the new balance, and the low-balance
    /// popup only when the balance drops below the threshold (it gave two or three popups per transaction).
    @Test func theDesktopExampleGivesOnePopupPerTransaction() throws {
        let relay = try AlertSettings.load(file: PythonPeer.root.appending(path: "config/desktop.yaml").path)
        let planner = RulePlanner(rules: relay.rules, sinks: relay.sinksByName)
        let child = UUID()
        func transaction(_ amount: Decimal, after: Decimal) -> RelayEvent {
            let t = Transaction(
                id: UUID(), childId: child, amount: amount, type: .debit, description: "x", balanceAfter: after,
                createdAt: Date(), createdByName: "P")
            return RelayEvent(
                kind: .transactionCreated, at: Date(), childId: child, childName: "Alice", transaction: t,
                balance: after, previousBalance: after + amount)
        }
        #expect(planner.plan(transaction(1, after: 20)).map(\.kind) == [.transactionCreated])
        #expect(
            Set(planner.plan(transaction(1, after: Decimal(string: "4.50")!)).map(\.kind)) == [
                .transactionCreated, .balanceLow,
            ], "crossing below 5.00")
        #expect(
            planner.plan(transaction(1, after: Decimal(string: "3.50")!)).map(\.kind) == [.transactionCreated],
            "already below: no second low popup")
        let balance = RelayEvent(
            kind: .balanceUpdated, at: Date(), childId: child, childName: "Alice", balance: 3,
            previousBalance: Decimal(string: "3.50")!)
        #expect(
            planner.plan(balance).filter { $0.kind != .balanceLow }.isEmpty, "no balance popup beside the transaction's"
        )
    }

    @Test func suggestionsAreCloseWordsOnly() {
        #expect(Suggest.closest(to: "rule", in: ConfigSchema.sections) == "rules")
        #expect(Suggest.closest(to: "utl", in: ["url", "token"]) == "url", "two letters swapped are one edit")
        #expect(Suggest.closest(to: "colour", in: ["url", "token"]) == nil)
        #expect(Suggest.fix(for: "colour", in: ["url", "token"]) == "use one of token, url")
    }
}
