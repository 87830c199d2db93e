import Alerts
import AllowanceAPI
import Config
import Foundation
import Logging
import Store
import StoreContract
import TestSupport
import Testing

@testable import Relay

/// A summary goes out with its chart where the destination shows pictures: Telegram's `sendPhoto` and Discord's file
/// upload, each a multipart form read back with Python's email parser and Pillow.
@Suite(.serialized, .timeLimit(.minutes(1))) struct SummaryChartSinkTests {
    let logger = Logger(label: "relay-test")

    /// The forms the receiver took, as Python reads them.
    func forms(_ received: [WebhookReceiver.Received]) async throws -> [[String: Any]] {
        let lines = received.map { r in
            "{\"content_type\": \"\(r.headers["content-type"] ?? "")\", \"body\": \"\(Data(r.body).base64EncodedString())\"}"
        }
        let run = try await PythonPeer.run(script: "read_form.py", input: lines.joined(separator: "\n") + "\n")
        return try run.output.split(separator: "\n").map {
            try #require(try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any], "\(run.output)")
        }
    }

    /// Alice (12.00, a kite at 20.00 on her wish list) and her evening summary raised: the engine that sends it runs
    /// until the returned task is cancelled.
    func raiseTheEveningSummary(_ config: AlertSettings) throws -> Task<Void, Never> {
        let store = try Store.open(
            path: FileManager.default.temporaryDirectory.appending(path: "chart-\(UUID())/relay.sqlite").path)
        let alice = UUID()
        try store.storeCaughtUp(
            children: [Child(id: alice, firstName: "Alice", lastName: "E", weeklyAllowance: 10, currentBalance: 12)],
            transactions: [
                Transaction(
                    id: UUID(), childId: alice, amount: 2, type: .credit, description: "chores", balanceAfter: 12,
                    createdAt: Date().addingTimeInterval(-60), createdByName: "Pat")
            ])
        try store.storeWishList(
            child: alice, items: [WishListItem(id: UUID(), childId: alice, name: "kite", price: 20)])
        let engine = RelayEngine(store: store, config: config, logger: logger)
        try engine.install()
        let events = try config.currentSummaries(store: store, rule: "evening")
        #expect(events.first?.goals?.map(\.progress) == [60], "the kite at 12.00 of 20.00")
        try store.raiseSummaries(rule: "evening", due: Date(), events: events, baselineOnly: false)
        return Task { await engine.run() }
    }

    /// An e-mail shows the chart inside its HTML part: one multipart/related message, read as a mail client would.
    @Test func anEmailSummaryShowsTheChartInline() async throws {
        try #require(PythonPeer.available)
        let config = try AlertSettings.parse(
            "sinks:\n  parents:\n    type: email\n    url: smtp://localhost:25\n    from: relay@example.org\n"
                + "    to: [mum@example.org]\n", file: "t.yaml")
        let mail = try #require(makeSink(config.sinks[0]) as? MailSink)
        var event = RelayEvent(
            kind: .summary, at: Date(), childId: UUID(), childName: "Alice", balance: 12, detail: "today",
            transactions: [])
        event.from = Date().addingTimeInterval(-86400)
        var m = config.message(
            id: "dlv_1", kind: .summary, urgency: .normal, event: event, sink: config.sinks[0], markup: true)
        m.image = try config.chart(for: event).png()
        let read = try await PythonPeer.run(script: "read_mail.py", input: mail.render(m))
        let seen = try #require(
            try JSONSerialization.jsonObject(with: Data(read.output.utf8)) as? [String: Any], "\(read.output)")
        #expect(seen["type"] as? String == "multipart/related", "\(seen)")
        #expect(seen["parts"] as? [String] == ["text/plain", "text/html", "image/png"], "\(seen)")
        let image = try #require((seen["images"] as? [[String: Any]])?.first, "\(seen)")
        #expect(image["format"] as? String == "PNG" && image["size"] as? [Int] == [640, 320])
        let cid = try #require((image["cid"] as? String)?.trimmingCharacters(in: CharacterSet(charactersIn: "<>")))
        #expect((seen["html"] as? String)?.contains("src=\"cid:\(cid)\"") == true, "\(seen)")
    }

    @Test(arguments: ["telegram", "discord"])
    func theSummaryCarriesTheChildsChart(_ kind: String) async throws {
        try #require(PythonPeer.available)
        let chat = WebhookReceiver()
        try await chat.run { base in
            let sink =
                kind == "telegram"
                ? "    type: telegram\n    url: \(base)\n    token: \"123:abc\"\n    chat_id: \"42\"\n"
                : "    type: discord\n    url: \(base.appending(path: "api/webhooks/1/x"))\n"
            let config = try AlertSettings.parse(
                "sinks:\n  chat:\n\(sink)rules:\n  - name: evening\n    summary: daily at 19:00\n    to: chat\n",
                file: "t.yaml")
            let task = try raiseTheEveningSummary(config)
            defer { task.cancel() }
            #expect(await eventually(.seconds(10)) { chat.received.count >= 1 })
            let request = try #require(chat.received.first)
            let form = try #require(try await forms([request]).first)
            let fields = form["fields"] as? [String: String] ?? [:]
            let files = form["files"] as? [String: [String: Any]] ?? [:]
            let picture = try #require(files[kind == "telegram" ? "photo" : "files[0]"], "\(form)")
            #expect(picture["format"] as? String == "PNG" && picture["size"] as? [Int] == [640, 320], "\(picture)")
            if kind == "telegram" {
                #expect(request.path.hasSuffix("/bot123:abc/sendPhoto"))
                #expect(fields["chat_id"] == "42" && fields["caption"]?.contains("Alice") == true, "\(fields)")
            } else {
                let payload = try JSONSerialization.jsonObject(with: Data((fields["payload_json"] ?? "").utf8))
                #expect(((payload as? [String: Any])?["content"] as? String)?.contains("Alice") == true, "\(fields)")
            }
        }
    }

    /// Slack with a bot token: the external upload flow as Slack documents it. The receiver answers as Slack's Web
    /// API does; the oracle is Foundation's form and JSON readers and Pillow on the bytes that reached the upload URL.
    @Test func aSlackSummarySharesTheChartAsAFileWithTheTextAsItsComment() async throws {
        try #require(PythonPeer.available)
        let slack = WebhookReceiver()
        try await slack.run { base in
            slack.respond { r, _ in
                switch r.path {
                case "/api/files.getUploadURLExternal":
                    WebhookReceiver.Answer(
                        body:
                            #"{"ok":true,"upload_url":"\#(base.appending(path: "upload/v1/Cx9"))","file_id":"F0CHART"}"#
                    )
                case "/upload/v1/Cx9": WebhookReceiver.Answer(body: "OK - \(r.body.count)")
                default: WebhookReceiver.Answer(body: #"{"ok":true,"files":[{"id":"F0CHART"}]}"#)
                }
            }
            let config = try AlertSettings.parse(
                "sinks:\n  chat:\n    type: slack\n    url: \(base.appending(path: "api"))\n    token: xoxb-secret\n    channel: C0FAMILY1\n"
                    + "rules:\n  - name: evening\n    summary: daily at 19:00\n    to: chat\n", file: "t.yaml")
            let task = try raiseTheEveningSummary(config)
            defer { task.cancel() }
            #expect(await eventually(.seconds(10)) { slack.received.count >= 3 })
            let steps = slack.received
            #expect(
                steps.map(\.path) == [
                    "/api/files.getUploadURLExternal", "/upload/v1/Cx9", "/api/files.completeUploadExternal",
                ])
            guard steps.count == 3 else { return }
            // 1: form-encoded, the length the upload then has.
            #expect(steps[0].headers["authorization"] == "Bearer xoxb-secret")
            var form = URLComponents()
            form.percentEncodedQuery = steps[0].text
            let asked = Dictionary((form.queryItems ?? []).map { ($0.name, $0.value ?? "") }) { a, _ in a }
            #expect(asked["filename"] == "chart.png" && asked["length"] == String(steps[1].body.count), "\(asked)")
            // 2: the PNG, without the bot token (the upload URL carries its own permission).
            #expect(steps[1].headers["authorization"] == nil)
            let file = FileManager.default.temporaryDirectory.appending(path: "slack-\(UUID()).png").path
            try Data(steps[1].body).write(to: URL(fileURLWithPath: file))
            let read = try await PythonPeer.run(script: "read_chart.py", arguments: [file], input: "")
            let chart = try #require(
                try JSONSerialization.jsonObject(with: Data(read.output.utf8)) as? [String: Any], "\(read.output)")
            #expect(chart["format"] as? String == "PNG" && chart["size"] as? [Int] == [640, 320], "\(chart)")
            // 3: shared in the channel, the summary's text introducing it.
            let share = try #require(try JSONSerialization.jsonObject(with: Data(steps[2].body)) as? [String: Any])
            #expect(share["channel_id"] as? String == "C0FAMILY1", "\(share)")
            #expect((share["initial_comment"] as? String)?.contains("Alice") == true, "\(share)")
            #expect((share["files"] as? [[String: Any]])?.first?["id"] as? String == "F0CHART", "\(share)")
        }
    }

    /// What can carry the chart: Slack's upload needs the bot token and a channel's id (a name, or the incoming
    /// webhook, keeps the text alone); the desktop popup shows it as its image.
    @Test func whichSinksCarryThePicture() throws {
        func sink(_ yaml: String) throws -> SinkConfig {
            try AlertSettings.parse("sinks:\n  s:\n" + yaml, file: "t.yaml").sinks[0]
        }
        let api = "    type: slack\n    token: xoxb-1\n"
        #expect(try sink(api + "    channel: C0FAMILY1\n").showsPictures)
        #expect(try !sink(api + "    channel: \"#family\"\n").showsPictures)
        #expect(try !sink("    type: slack\n    url: https://hooks.slack.com/services/T/B/X\n").showsPictures)
        #expect(try sink("    type: desktop\n").showsPictures)
        #expect(try !sink("    type: ntfy\n    url: https://ntfy.sh/family\n").showsPictures)
    }
}
