import Alerts
import Config
import Foundation
import Relay
import Store
import TestSupport
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The Matrix sink against a real homeserver (Synapse, from PyPI, started by the test): a child's balance is one
/// message edited in place with `m.replace` events the server relates to it, and once the family redacts it, the
/// next balance is a new message (Matrix accepts an edit of a redacted event; clients would show nothing).
@Suite(
    .serialized, .timeLimit(.minutes(3)),
    .enabled(if: PythonPeer.available, "needs .venv with matrix-synapse: make test creates it"))
struct MatrixSynapseTests {
    struct Homeserver {
        let base: String, relayToken: String, mumToken: String, room: String

        /// The room's messages as the family's client reads them (newest last), with `mum`'s token.
        func messages() async throws -> [[String: Any]] {
            let room = self.room.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
            let answer = try await get("/_matrix/client/v3/rooms/\(room)/messages?dir=b&limit=100")
            let chunk = answer["chunk"] as? [[String: Any]] ?? []
            return chunk.reversed().filter { $0["type"] as? String == "m.room.message" }
        }

        func get(_ path: String) async throws -> [String: Any] {
            try await call("GET", path, body: nil)
        }

        func call(_ method: String, _ path: String, body: Data?) async throws -> [String: Any] {
            var request = URLRequest(url: URL(string: base + path)!)
            request.httpMethod = method
            request.httpBody = body
            request.setValue("Bearer \(mumToken)", forHTTPHeaderField: "Authorization")
            let (data, _) = try await TestHTTP.data(for: request)
            return try JSONSerialization.jsonObject(with: data) as? [String: Any] ?? [:]
        }

        /// The family deletes a message (a redaction, as Element's "Remove" does).
        func redact(_ event: String) async throws {
            let room = self.room.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
            let id = event.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
            let answer = try await call(
                "PUT", "/_matrix/client/v3/rooms/\(room)/redact/\(id)/\(UUID())", body: Data("{}".utf8))
            #expect(answer["event_id"] != nil, "redacted: \(answer)")
        }
    }

    func balance(_ amount: String, id: String) -> Message {
        let event = RelayEvent(
            kind: .balanceUpdated, at: Date(), childId: alice, childName: "Alice", balance: Decimal(string: amount)!)
        return Message(
            id: id, kind: .balanceUpdated, urgency: .normal, title: "Alice", text: "Alice's balance: \(amount)",
            event: event)
    }

    /// A Synapse of its own in a new folder: the peer (stop it), the homeserver's accounts and room, the folder.
    func startHomeserver() async throws -> (PythonPeer, Homeserver, String) {
        let dir = FileManager.default.temporaryDirectory.appending(path: "synapse-\(UUID())").path
        let peer = try await PythonPeer(script: "synapse_homeserver.py", arguments: [dir])
        let parts = peer.address.split(separator: " ").map(String.init)
        guard parts.count == 4 else {
            peer.stop()
            throw HarnessError("the homeserver said \(peer.address)")
        }
        return (peer, Homeserver(base: parts[0], relayToken: parts[1], mumToken: parts[2], room: parts[3]), dir)
    }

    static func body(_ event: [String: Any]) -> String {
        (event["content"] as? [String: Any])?["body"] as? String ?? ""
    }
    static func replaces(_ event: [String: Any]) -> String? {
        ((event["content"] as? [String: Any])?["m.relates_to"] as? [String: Any])?["event_id"] as? String
    }

    /// A summary with its chart: the text, then an `m.image` event whose `mxc://` content the homeserver serves back
    /// as the PNG (read by Pillow). Sent again with the same id (a retry after a crash), nothing is posted twice.
    @Test func aSummarysChartIsAnImageEventTheHomeserverServes() async throws {
        let (peer, server, dir) = try await startHomeserver()
        defer { peer.stop() }
        let yaml =
            "sinks:\n  chat:\n    type: matrix\n    url: \(server.base)\n    token: \(server.relayToken)\n    room: \"\(server.room)\"\n"
        let config = try AlertSettings.parse(yaml, file: "t.yaml")
        let chat = makeSink(config.sinks[0])
        var event = RelayEvent(
            kind: .summary, at: Date(), childId: alice, childName: "Alice", balance: 12, detail: "today",
            transactions: [])
        event.from = Date().addingTimeInterval(-86400)
        var m = config.message(
            id: "dlv_summary", kind: .summary, urgency: .normal, event: event, sink: config.sinks[0], markup: true)
        m.image = try config.chart(for: event).png()
        #expect(await chat.send(m) == .delivered)
        #expect(await chat.send(m) == .delivered, "a retry")
        let events = try await server.messages()
        #expect(events.count == 2, "the text and the picture, once each: \(events)")
        let image = try #require(events.last?["content"] as? [String: Any], "\(events)")
        #expect(image["msgtype"] as? String == "m.image")
        let uri = try #require(image["url"] as? String)
        #expect(uri.hasPrefix("mxc://"))
        let media = uri.dropFirst("mxc://".count)
        var request = URLRequest(url: URL(string: server.base + "/_matrix/client/v1/media/download/\(media)")!)
        request.setValue("Bearer \(server.mumToken)", forHTTPHeaderField: "Authorization")
        let (png, _) = try await TestHTTP.data(for: request)
        let file = dir + "/downloaded.png"
        try png.write(to: URL(fileURLWithPath: file))
        let read = try await PythonPeer.run(script: "read_chart.py", arguments: [file], input: "")
        #expect(read.output.contains("\"format\": \"PNG\"") && read.output.contains("[640, 320]"), "\(read.output)")
    }

    @Test func balanceEditsRelateToTheFirstMessageAndARedactedOneIsPostedAnew() async throws {
        let (peer, server, _) = try await startHomeserver()
        defer { peer.stop() }
        let store = try Store.open(path: temporaryPath())
        let yaml =
            "sinks:\n  chat:\n    type: matrix\n    url: \(server.base)\n    token: \(server.relayToken)\n    room: \"\(server.room)\"\n"
        let chat = makeSink(try AlertSettings.parse(yaml, file: "t.yaml").sinks[0], memory: store)

        #expect(await chat.send(balance("10.00", id: "dlv_1")) == .delivered)
        #expect(await chat.send(balance("9.00", id: "dlv_2")) == .delivered)
        var events = try await server.messages()
        try #require(events.count == 2, "\(events)")
        let first = try #require(events[0]["event_id"] as? String)
        #expect(Self.body(events[0]).contains("10.00") && Self.replaces(events[0]) == nil)
        #expect(Self.replaces(events[1]) == first, "the second is an m.replace of the first")
        // The homeserver relates the edit to the original: a client shows the original with the new text.
        let original = try await server.get(
            "/_matrix/client/v3/rooms/\(server.room.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!)/event/\(first.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!)"
        )
        let relations = (original["unsigned"] as? [String: Any])?["m.relations"] as? [String: Any]
        #expect(relations?["m.replace"] != nil, "Synapse aggregates the edit: \(original)")

        try await server.redact(first)
        #expect(await chat.send(balance("8.00", id: "dlv_3")) == .delivered)
        #expect(await chat.send(balance("7.50", id: "dlv_4")) == .delivered)
        events = try await server.messages()
        let standing = events.filter { Self.replaces($0) == nil && !Self.body($0).isEmpty }
        try #require(standing.count == 1, "one message stands after the redaction: \(events)")
        #expect(Self.body(standing[0]).contains("8.00"), "the balance posted anew")
        let again = try #require(standing[0]["event_id"] as? String)
        #expect(
            Self.replaces(events.last!) == again && Self.body(events.last!).contains("7.50"),
            "and then edited: \(events.last!)")
        #expect(
            !events.contains { Self.replaces($0) == first && Self.body($0).contains("8.00") },
            "no edit of the redacted one")
    }
}
