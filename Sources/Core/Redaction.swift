import Foundation

extension URL {
    /// The URL without its query string, which may hold tokens (`id=`, `access_token=`).
    public var redactedForLogs: String {
        guard var c = URLComponents(url: self, resolvingAgainstBaseURL: false) else { return "<url>" }
        let hadQuery = c.query != nil
        (c.query, c.fragment, c.user, c.password) = (nil, nil, nil, nil)
        // The ellipsis after the URL is built: inside it, URLComponents would percent-encode it (%E2%80%A6).
        return (c.string ?? "<url>") + (hadQuery ? "?…" : "")
    }
}

extension URL {
    /// scheme://host[:port]: where a redirect pointed, with nothing that could carry a secret.
    public var originForLogs: String {
        "\(scheme ?? "http")://\(host ?? "?")" + (port.map { ":\($0)" } ?? "")
    }
}

/// A header value that stays one header: no CR, LF or other control character (a token read from a file, or
/// handed over by a server, could otherwise add headers of its own to a request).
public enum HeaderValue {
    public static func isSafe(_ value: String) -> Bool {
        !value.unicodeScalars.contains { $0.value < 0x20 && $0 != "\t" || $0.value == 0x7F }
    }
}
