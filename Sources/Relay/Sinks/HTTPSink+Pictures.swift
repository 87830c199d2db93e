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
        let base = config.url?.absoluteString ?? "http://invalid"
        let root = base.hasSuffix("/") ? String(base.dropLast()) : base
        let timeout = Duration.milliseconds(Int64(config.timeout * 1000))
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
