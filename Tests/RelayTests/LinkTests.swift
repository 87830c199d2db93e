import Alerts
import AllowanceAPI
import Config
import Foundation
import HTTPTransport
import Relay
import SignalRProtocol
import Store
import TestSupport
import Testing

/// One link template, each destination's way of showing it.
@Suite struct LinkTests {
    func request(_ kind: String, _ extra: String = "") throws -> HTTPRequest {
        let url =
            [
                "telegram": "", "gotify": "    url: https://push.example.org\n    token: t\n",
                "matrix": "    url: https://m.example.org\n    token: t\n    room: \"!r:x\"\n",
            ][kind]
            ?? "    url: https://hooks.example.org/x\n"
        let chat = kind == "telegram" ? "    token: \"1:a\"\n    chat_id: \"42\"\n" : ""
        let yaml = """
            relay:
              link: https://allowance.example.org/children/{child_id}?t={transaction_id}
              icon_url: https://allowance.example.org/icon.png
            sinks:
              s:
                type: \(kind)
            \(url)\(chat)\(extra)
            """
        let config = try AlertSettings.parse(yaml, file: "t.yaml")
        var t = transaction("1", after: "1")
        t.id = UUID(uuidString: "00000000-0000-4000-8000-000000000001")!
        let event = created(t)
        let m = config.message(
            id: "d", kind: .transactionCreated, urgency: .normal, event: event, sink: config.sinks[0], markup: false)
        let sink = try #require(makeSink(config.sinks[0], formatting: config.formatting) as? HTTPSink)
        return sink.request(for: m)
    }

    var link: String {
        "https://allowance.example.org/children/\(alice.lowercased)?t=00000000-0000-4000-8000-000000000001"
    }

    @Test func ntfyGetsClickAnOpenButtonTheIconAndMarkdown() throws {
        let r = try request("ntfy")
        #expect(r[header: "Click"] == link)
        #expect(r[header: "Actions"] == "view, Open, \(link)")
        #expect(r[header: "Icon"] == "https://allowance.example.org/icon.png" && r[header: "Markdown"] == "yes")
    }

    @Test func gotifyGetsAClickURL() throws {
        let body = try JSONValue(parsing: try request("gotify").body)
        #expect(body["extras"]?["client::notification"]?["click"]?["url"]?.stringValue == link)
    }

    @Test func chatsGetAButtonOrALink() throws {
        let teams = try JSONValue(parsing: try request("teams").body)
        let action = teams["attachments"]?.arrayValue?.first?["content"]?["actions"]?.arrayValue?.first
        #expect(action?["type"]?.stringValue == "Action.OpenUrl" && action?["url"]?.stringValue == link)
        let telegram = try JSONValue(parsing: try request("telegram").body)
        #expect(
            telegram["reply_markup"]?["inline_keyboard"]?.arrayValue?.first?.arrayValue?.first?["url"]?.stringValue
                == link)
        #expect(
            try JSONValue(parsing: try request("slack").body)["text"]?.stringValue?.hasSuffix(
                "<\(link)|Open in Allowance Tracker>") == true)
        #expect(
            try JSONValue(parsing: try request("discord").body)["content"]?.stringValue?.hasSuffix("(<\(link)>)")
                == true)
        #expect(
            try JSONValue(parsing: try request("mattermost").body)["text"]?.stringValue?.hasSuffix("(\(link))") == true)
        let matrix = try JSONValue(parsing: try request("matrix").body)
        #expect(
            matrix["formatted_body"]?.stringValue?.contains(
                "<a href=\"\(link.replacingOccurrences(of: "&", with: "&amp;"))\">") == true)
    }

    @Test func aSinksOwnTemplateWinsAndAnAlertWithoutAChildLeadsToTheFrontPage() throws {
        let own = try request("ntfy", "    link: https://other.example.org/{child}\n")
        #expect(own[header: "Click"] == "https://other.example.org/Alice")
        let config = try AlertSettings.parse(
            "relay:\n  link: https://allowance.example.org/children/{child_id}\n", file: "t.yaml")
        #expect(
            config.formatting.link(for: RelayEvent(kind: .connectionLost, at: Date()))
                == "https://allowance.example.org/")
    }
}
