import Foundation

/// A secret value that never prints itself.
public struct Secret: Sendable, CustomStringConvertible, CustomDebugStringConvertible {
    public let value: String
    public init(_ value: String) { self.value = value }
    public var description: String { "<redacted>" }
    public var debugDescription: String { "<redacted>" }

    /// Reads a secret file: trimmed, must not be empty; a file others can read is refused (chmod 600 it).
    /// `what` names the file in messages ("token file", "webhook secret file").
    public static func read(file given: String, what: String) throws(APIError) -> Secret {
        let file = (given as NSString).expandingTildeInPath
        var info = stat()
        guard stat(file, &info) == 0 else {
            throw APIError(
                .secretFile, "Cannot read the \(what) '\(file)': \(String(cString: strerror(errno)))",
                fix: "check the path")
        }
        // A pipe or a device would block or never end; a secret is a line, not megabytes.
        guard info.st_mode & S_IFMT == S_IFREG else {
            throw APIError(
                .secretFile, "The \(what) '\(file)' is not a regular file",
                fix: "point it at a file holding the secret on one line")
        }
        guard info.st_size <= 65536 else {
            throw APIError(
                .secretFile,
                "The \(what) '\(file)' is \(info.st_size) bytes; a secret file holds one line (at most 64 KB)",
                fix: "check that it is the right file")
        }
        if info.st_mode & 0o077 != 0 {
            throw APIError(
                .secretFile,
                "The \(what) '\(file)' can be read by other users (mode \(String(info.st_mode & 0o777, radix: 8)))",
                fix: "chmod 600 '\(file)'")
        }
        guard let data = FileManager.default.contents(atPath: file) else {
            throw APIError(.secretFile, "Cannot read the \(what) '\(file)'", fix: "check its owner and permissions")
        }
        let text = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        guard !text.isEmpty else {
            throw APIError(.secretFile, "The \(what) '\(file)' is empty", fix: "write the secret into it, on one line")
        }
        return Secret(text)
    }
}
