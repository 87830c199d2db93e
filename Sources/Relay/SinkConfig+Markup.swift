import Config
import Foundation

/// A placeholder's value written for the destination's markup: what the sinks do with the text they send.
extension SinkConfig {
    /// Escapes a placeholder's value for the destination's markup.
    public func escape(_ text: String, markup: Bool) -> String {
        switch kind {
        case .slack:
            return Self.slackEntities(text)
        case .mattermost:
            // Mattermost renders Markdown and pings on @here, @channel, @all and @name.
            return Self.unmention(Self.markdown(Self.slackEntities(text)))
        case .discord, .teams:
            // Markdown: a description must not become a masked link or a heading. (Discord's pings are off by
            // allowed_mentions; the zero-width space keeps "@everyone" from even looking like one.)
            return Self.unmention(Self.markdown(text))
        case .telegram, .matrix:
            return Self.html(text)
        case .desktop:
            return markup ? Self.html(text) : text
        case .email:
            return text  // the HTML part escapes the text it is given as a whole
        case .ntfy:
            return Self.markdown(text)  // sent with `Markdown: yes`
        case .gotify, .webhook, .mqtt:
            return text
        }
    }

    /// The characters that make Markdown formatting, links, spoilers or mentions in a chat line, escaped with a
    /// backslash: shown as typed. (Not `.` or `-`: amounts stay "$7.77".)
    static func markdown(_ text: String) -> String {
        var out = ""
        for c in text {
            if "\\`*_~|[]<>#".contains(c) { out.append("\\") }
            out.append(c)
        }
        return out
    }

    /// "@here" and the like with a zero-width space after the @, so no chat pings anyone because of a description.
    static func unmention(_ text: String) -> String {
        text.contains("@") ? text.replacingOccurrences(of: "@", with: "@\u{200B}") : text
    }

    /// Cuts `text` to `limit` characters without leaving half an HTML entity or tag at the end (Telegram
    /// refuses such a message; Matrix shows the pieces).
    static func cut(_ text: String, to limit: Int, html: Bool) -> String {
        guard text.count > limit else { return text }
        var cut = String(text.prefix(limit))
        if html {
            if let amp = cut.lastIndex(of: "&"), !cut[amp...].contains(";") { cut = String(cut[..<amp]) }
            if let lt = cut.lastIndex(of: "<"), !cut[lt...].contains(">") { cut = String(cut[..<lt]) }
        }
        return cut
    }

    /// The three characters Slack's message format (and Mattermost's) takes as markup.
    static func slackEntities(_ text: String) -> String {
        text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
            .replacingOccurrences(of: ">", with: "&gt;")
    }

    /// Text as HTML text (also inside a double-quoted attribute): a name or a description never becomes markup.
    public static func html(_ text: String) -> String {
        text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
            .replacingOccurrences(of: ">", with: "&gt;").replacingOccurrences(of: "\"", with: "&quot;")
    }
}

extension SinkConfig {
    /// Whether a summary's chart goes with its text: Telegram (`sendPhoto`), Discord (a file with the message),
    /// Matrix (an `m.image` event after the text), e-mail (inline in the HTML part), the desktop popup (its
    /// `image-path`) and Slack with a bot token and a channel's id (a file shared with the text as its comment; the
    /// incoming-webhook form cannot upload, and the upload's channel must be an id, not a name).
    public var showsPictures: Bool {
        switch kind {
        case .telegram, .discord, .matrix, .email, .desktop: true
        case .slack: token != nil && Self.isSlackChannelId(channel ?? "")
        default: false
        }
    }

    /// Slack's channel ids: `C...` (public), `G...` (private, older), `D...` (a direct message), upper-case letters
    /// and digits.
    public static func isSlackChannelId(_ s: String) -> Bool {
        s.count >= 9 && ["C", "G", "D"].contains(s.first)
            && s.allSatisfy { $0.isASCII && ($0.isUppercase || $0.isNumber) }
    }
}
