/// Text from the server on its way to people: a description or a name must not forge a log line, move a
/// terminal's cursor, reverse what a popup shows, or cut a stored value at a NUL.
public enum SafeText {
    /// Longest description and name kept (the API allows 500 characters for a description): longer ones are
    /// cut at storage, so a 10 MB description costs neither the database nor a destination.
    public static let maxDescription = 500
    public static let maxName = 100

    /// As stored: without NUL, cut to `limit` characters.
    public static func stored(_ text: String, limit: Int) -> String {
        // The usual case, on every event: a byte count and a byte scan, no walk over characters.
        if text.utf8.count <= limit, !text.utf8.contains(0) { return text }
        let clean = text.utf8.contains(0) ? text.replacingOccurrences(of: "\0", with: "") : text
        return clean.count > limit ? String(clean.prefix(limit - 1)) + "…" : clean
    }

    /// For a popup or a chat line: control characters become spaces, bidirectional overrides and isolates are
    /// dropped (they reverse what follows: "txt.exe" shown as "exe.txt").
    public static func printable(_ text: String) -> String {
        if !text.utf8.contains(where: { $0 < 0x20 || $0 >= 0x7F }) { return text }
        guard text.unicodeScalars.contains(where: { isControl($0) || isBidiControl($0) }) else { return text }
        var out = String.UnicodeScalarView()
        for s in text.unicodeScalars where !isBidiControl(s) { out.append(isControl(s) ? " " : s) }
        return String(out)
    }

    /// For a log line or a terminal: control and bidirectional characters written as escapes (\n, \u{1B}), so
    /// one value is one line and shows what it really holds.
    public static func forLog(_ text: String) -> String {
        // Printable ASCII without quote or backslash (nearly every value): as it is, from a byte scan.
        if !text.utf8.contains(where: { $0 < 0x20 || $0 >= 0x7F || $0 == 0x22 || $0 == 0x5C }) { return text }
        guard text.unicodeScalars.contains(where: { isControl($0) || isBidiControl($0) || $0 == "\"" || $0 == "\\" })
        else {
            return text
        }
        var out = ""
        for s in text.unicodeScalars {
            switch s {
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case _ where isControl(s) || isBidiControl(s): out += "\\u{\(String(s.value, radix: 16, uppercase: true))}"
            default: out.unicodeScalars.append(s)
            }
        }
        return out
    }

    static func isControl(_ s: Unicode.Scalar) -> Bool { s.value < 0x20 || (0x7F...0x9F).contains(s.value) }

    static func isBidiControl(_ s: Unicode.Scalar) -> Bool {
        (0x202A...0x202E).contains(s.value) || (0x2066...0x2069).contains(s.value) || s.value == 0x200E
            || s.value == 0x200F
            || s.value == 0x061C
    }
}
