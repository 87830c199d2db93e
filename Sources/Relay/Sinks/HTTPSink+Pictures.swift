import Config
import Core
import Foundation
import HTTPTransport

extension HTTPSink {
    /// Matrix shows a picture as an event of its own: the text goes first (as without one), then the PNG is uploaded
    /// to the homeserver's media repository and an `m.image` event names it. Both events' transaction ids come from
    /// the delivery id, so a retry after a partial send posts neither twice (the homeserver answers a known
    /// transaction id with the same event); only the upload may be made again.
    func sendMatrixPicture(_ m: Message, _ image: [UInt8]) async -> DeliveryOutcome {
        var text = m
        text.image = nil
        let posted = await post(text).outcome
        guard posted == .delivered else { return posted }
        let auth = "Bearer \(config.token?.value ?? "")"
        var upload = HTTPRequest(
            .post, URL(string: root + "/_matrix/media/v3/upload?filename=chart.png")!, body: image, timeout: timeout,
            maxResponseBytes: 64 * 1024)
        upload[header: "Content-Type"] = "image/png"
        upload[header: "Authorization"] = auth
        let uri: String
        do {
            let answer = try await client.send(upload)
            let outcome = Self.classify(answer, kind: .matrix)
            guard outcome == .delivered else { return outcome }
            guard let found = (try? JSONValue(parsing: answer.body))?["content_uri"]?.stringValue else {
                return .retry("\(config.name): the homeserver's upload answer names no content_uri", after: nil)
            }
            uri = found
        } catch {
            return .retry("\(config.name): \(error.message)", after: nil)
        }
        let room = (config.room ?? "").addingPercentEncoding(withAllowedCharacters: Self.unreserved) ?? ""
        let event: JSONValue = [
            "msgtype": "m.image", "body": "chart.png", "url": .string(uri),
            "info": ["mimetype": "image/png", "size": .number(String(image.count))],
        ]
        var send = HTTPRequest(
            .put, URL(string: root + "/_matrix/client/v3/rooms/\(room)/send/m.room.message/\(m.id)-chart")!,
            body: Array(event.serialized.utf8), timeout: timeout, maxResponseBytes: 64 * 1024)
        send[header: "Content-Type"] = "application/json"
        send[header: "Authorization"] = auth
        do { return Self.classify(try await client.send(send), kind: .matrix) } catch {
            return .retry("\(config.name): \(error.message)", after: nil)
        }
    }
}

extension HTTPSink {
    /// Slack's link markup under a message's text: `<url|label>`.
    static func slackLink(_ m: Message) -> String { m.link.map { "\n<\($0)|Open in Allowance Tracker>" } ?? "" }

    /// Slack (bot token, a channel's id) shares a picture as a file with the text as its comment: one message, as
    /// Slack's external upload flow has it. `files.getUploadURLExternal` names an upload URL and a file id, the PNG
    /// is posted to that URL (Slack's file host; the bot token is not sent there, the URL carries its own
    /// permission), and `files.completeUploadExternal` shares the file in the channel with the text. Only the last
    /// step shows anything: a retry after a failed first or second step leaves an unshared file behind, never a
    /// second message.
    func sendSlackPicture(_ m: Message, _ image: [UInt8]) async -> DeliveryOutcome {
        let auth = "Bearer \(config.token?.value ?? "")"
        let title = m.title.isEmpty ? "chart.png" : m.title
        func form(_ pairs: [(String, String)]) -> [UInt8] {
            Array(
                pairs.map { "\($0)=\($1.addingPercentEncoding(withAllowedCharacters: Self.unreserved) ?? "")" }
                    .joined(separator: "&").utf8)
        }
        // 1. Where to put the file (form-encoded, as this method takes its arguments).
        var ask = HTTPRequest(
            .post, URL(string: root + "/files.getUploadURLExternal")!,
            body: form([("filename", "chart.png"), ("length", String(image.count)), ("alt_txt", title)]),
            timeout: timeout, maxResponseBytes: 64 * 1024)
        ask[header: "Content-Type"] = "application/x-www-form-urlencoded"
        ask[header: "Authorization"] = auth
        let uploadURL: URL
        let fileId: String
        do {
            let answer = try await client.send(ask)
            let outcome = Self.classify(answer, kind: .slack, slackAPI: true)
            guard outcome == .delivered else { return outcome }
            let json = try? JSONValue(parsing: answer.body)
            guard let found = json?["upload_url"]?.stringValue.flatMap(URL.init(string:)),
                ["https", "http"].contains(found.scheme?.lowercased() ?? ""), let id = json?["file_id"]?.stringValue
            else {
                return .retry(
                    "\(config.name): Slack's files.getUploadURLExternal answer names no upload_url and file_id",
                    after: nil)
            }
            (uploadURL, fileId) = (found, id)
        } catch {
            return .retry("\(config.name): \(error.message)", after: nil)
        }
        // 2. The PNG itself, as the body.
        var upload = HTTPRequest(.post, uploadURL, body: image, timeout: timeout, maxResponseBytes: 64 * 1024)
        upload[header: "Content-Type"] = "image/png"
        do {
            let outcome = Self.classify(try await client.send(upload), kind: .slack)
            guard outcome == .delivered else { return outcome }
        } catch {
            return .retry("\(config.name): \(error.message)", after: nil)
        }
        // 3. Shared in the channel, the alert's text as the comment that introduces it.
        let text = SinkConfig.cut(m.text, to: config.maxLength, html: false) + Self.slackLink(m)
        let complete: JSONValue = [
            "files": [["id": .string(fileId), "title": .string(title)]],
            "channel_id": .string(config.channel ?? ""), "initial_comment": .string(text),
        ]
        var share = HTTPRequest(
            .post, URL(string: root + "/files.completeUploadExternal")!, body: Array(complete.serialized.utf8),
            timeout: timeout, maxResponseBytes: 64 * 1024)
        share[header: "Content-Type"] = "application/json; charset=utf-8"
        share[header: "Authorization"] = auth
        do { return Self.classify(try await client.send(share), kind: .slack, slackAPI: true) } catch {
            return .retry("\(config.name): \(error.message)", after: nil)
        }
    }
}
