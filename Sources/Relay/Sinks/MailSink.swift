import Config
import Foundation
import HTTPTransport

/// Alerts by e-mail, over SMTP with STARTTLS (`smtp://`, required unless `require_tls: false`) or TLS from the start
/// (`smtps://`), through libcurl. Each mail has a plain-text and an HTML part from the same templates, and a
/// `Message-ID` made from the delivery id, so a resend after a crash is the same mail to a client that dedups.
public struct MailSink: Sink {
    public let config: SinkConfig
    let client: HTTPClient
    let now: @Sendable () -> Date

    init(config: SinkConfig, client: HTTPClient = .shared, now: @escaping @Sendable () -> Date = { Date() }) {
        self.config = config
        self.client = client
        self.now = now
    }

    public func supportsMarkup() async -> Bool { false }

    public func send(_ m: Message) async -> DeliveryOutcome {
        do {
            _ = try await client.send(request(for: m))
            return .delivered
        } catch {
            guard error.kind == .refused, let code = error.serverCode else {
                return .retry("email: \(error.message)", after: nil)
            }
            // 535 and other login failures concern every mail: they wait for a fixed config rather than die.
            if (500..<600).contains(code), code != 530, code != 535 { return .rejected("email: \(error.message)") }
            return .retry("email: \(error.message)", after: nil)
        }
    }

    public func request(for m: Message) -> MailRequest {
        var r = MailRequest(
            url: config.url ?? URL(string: "smtp://localhost")!, from: config.mail.from, to: config.mail.to,
            message: Array(render(m).utf8))
        r.username = config.username
        r.password = config.password?.value
        r.requireTLS = config.mail.requireTLS
        r.trust = config.caFile.map { .caFile($0) } ?? .system
        r.timeout = .milliseconds(Int64(config.timeout * 1000))
        return r
    }

    /// The whole message (RFC 5322 and MIME), CRLF line ends, both parts in base64: no line is too long and no
    /// byte needs the server's 8BITMIME. With a picture (a summary's chart), the two parts and the PNG are one
    /// `multipart/related`, the HTML showing the PNG by its Content-ID.
    public func render(_ m: Message) -> String {
        let boundary = "=_allowance_\(m.id.filter { $0.isLetter || $0.isNumber })"
        let date = Self.dateFormatter.string(from: now())
        var html =
            "<!doctype html><html><body style=\"font-family:sans-serif\"><p><b>\(SinkConfig.html(m.title))</b></p>"
        html += "<p>" + SinkConfig.html(m.text).replacingOccurrences(of: "\n", with: "<br>") + "</p>"
        var text = m.text
        if let link = m.link {
            html += "<p><a href=\"\(SinkConfig.html(link))\">Open in Allowance Tracker</a></p>"
            text += "\n\n" + link
        }
        // A summary's chart shows inside the HTML part, from a related part named by its Content-ID.
        let chartId = "chart-\(m.id.filter { $0.isLetter || $0.isNumber })@allowance-relay"
        if m.image != nil {
            html += "<p><img src=\"cid:\(chartId)\" alt=\"\(SinkConfig.html(m.title))\" width=\"640\"></p>"
        }
        html += "</body></html>"
        let alternative = [
            "--\(boundary)",
            "Content-Type: text/plain; charset=utf-8",
            "Content-Transfer-Encoding: base64",
            "",
            Self.base64Lines(text),
            "--\(boundary)",
            "Content-Type: text/html; charset=utf-8",
            "Content-Transfer-Encoding: base64",
            "",
            Self.base64Lines(html),
            "--\(boundary)--",
        ]
        var body = ["Content-Type: multipart/alternative; boundary=\"\(boundary)\"", ""] + alternative
        if let image = m.image {
            let related = boundary + "_related"
            body =
                [
                    "Content-Type: multipart/related; boundary=\"\(related)\"; type=\"multipart/alternative\"", "",
                    "--\(related)",
                ]
                + ["Content-Type: multipart/alternative; boundary=\"\(boundary)\"", ""] + alternative
                + [
                    "--\(related)",
                    "Content-Type: image/png",
                    "Content-Transfer-Encoding: base64",
                    "Content-ID: <\(chartId)>",
                    "Content-Disposition: inline; filename=\"chart.png\"",
                    "",
                    Self.base64Lines(image),
                    "--\(related)--",
                ]
        }
        let lines = [
            "From: allowance-relay <\(config.mail.from)>",
            "To: " + config.mail.to.joined(separator: ", "),
            "Subject: " + Self.encodedWord(m.title),
            "Date: " + date,
            "Message-ID: <\(m.id)@allowance-relay>",
            "MIME-Version: 1.0",
            "Auto-Submitted: auto-generated",
            "X-Allowance-Kind: \(m.kind.rawValue)",
        ]
        return (lines + body + [""]).joined(separator: "\r\n")
    }

    /// A header value in any script (RFC 2047): ASCII as it is, anything else as a base64 encoded word.
    static func encodedWord(_ text: String) -> String {
        let clean = text.filter { $0 != "\r" && $0 != "\n" }
        if clean.allSatisfy({ $0.isASCII }) { return clean }
        return "=?UTF-8?B?" + Data(clean.utf8).base64EncodedString() + "?="
    }

    static func base64Lines(_ text: String) -> String { base64Lines(Array(text.utf8)) }

    static func base64Lines(_ bytes: [UInt8]) -> String {
        Data(bytes).base64EncodedString(options: [
            .lineLength76Characters, .endLineWithCarriageReturn, .endLineWithLineFeed,
        ])
    }

    static var dateFormatter: DateFormatter {
        let f = DateFormatter()
        f.locale = Locale(identifier: "en_US_POSIX")
        f.dateFormat = "EEE, dd MMM yyyy HH:mm:ss Z"
        return f
    }
}
