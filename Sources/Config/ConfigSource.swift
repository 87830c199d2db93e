import Foundation
import Synchronization

/// The configuration file and the environment as a command reads them: the file is read and parsed once, and the
/// settings and the relay's sections are all taken from that one reading, so that a file edited meanwhile cannot give
/// one command two configurations.
public struct ConfigSource: Sendable {
    public let file: String?
    public let environment: [String: String]
    private let parsed: Result<ConfigFile?, ConfigErrors>

    public init(file: String?, environment: [String: String] = ProcessInfo.processInfo.environment) {
        self.file = file
        self.environment = environment
        parsed = Result { () throws(ConfigErrors) -> ConfigFile? in
            try file.map { path throws(ConfigErrors) in try ConfigFile.read(path) }
        }
    }

    /// The file's values with the environment on top; the file's own mistakes (unreadable, not YAML) throw.
    public func values() throws(ConfigErrors) -> ConfigValues {
        ConfigValues(try parsed.get(), environment)
    }

    /// The source a short-lived command reads: made at the first call for `file`, the same one after that. A
    /// long-lived process reads the file again when it must (`run` at a SIGHUP) with `ConfigSource(file:)`.
    public static func once(file: String?) -> ConfigSource {
        made.withLock { sources in
            if let made = sources[file ?? ""] { return made }
            let source = ConfigSource(file: file)
            sources[file ?? ""] = source
            return source
        }
    }

    private static let made = Mutex<[String: ConfigSource]>([:])
}

extension ConfigSource {
    /// The file a command reads when `--config` names none: `$XDG_CONFIG_HOME/allowance-relay/relay.yaml` (a user's,
    /// `~/.config` when the variable is unset), then `/etc/allowance-relay/relay.yaml` (the service's); nil when
    /// neither exists (the environment alone is the configuration).
    public static func locate(
        _ given: String?, environment: [String: String] = ProcessInfo.processInfo.environment
    ) -> String? {
        if let given { return given }
        let home = environment["HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? NSHomeDirectory()
        let userConfig = environment["XDG_CONFIG_HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? home + "/.config"
        return [userConfig + "/allowance-relay/relay.yaml", "/etc/allowance-relay/relay.yaml"]
            .first { FileManager.default.fileExists(atPath: $0) }
    }

    /// `path` as written in the file at `file`: a relative one is taken from the file's folder, not from wherever
    /// the command runs; `~` is the user's home; an absolute one is kept.
    public static func resolve(_ path: String, besides file: String?) -> String {
        if path.hasPrefix("/") { return path }
        if path.hasPrefix("~") { return (path as NSString).expandingTildeInPath }
        guard let file else { return path }
        let folder = URL(fileURLWithPath: file).deletingLastPathComponent()
        return folder.appending(path: path).standardizedFileURL.path
    }
}

/// A fix for text meant as a URL of `schemes`: a mangled scheme put right (`htp//host` -> `http://host`,
/// `https:/host` -> `https://host`), a missing one added (`host:5000` -> `http://host:5000`); nil when neither fits.
public enum URLFix {
    public static func suggest(_ text: String, schemes: [String] = ["http", "https"]) -> String? {
        let t = text.trimmingCharacters(in: .whitespaces)
        guard !t.isEmpty, !t.contains(" "), !t.contains("@") else { return nil }
        if let m = t.firstMatch(of: /^([A-Za-z][A-Za-z0-9+.\-]*)[:;]?\/{1,3}(.+)$/) {
            let word = String(m.1).lowercased()
            if let scheme = schemes.contains(word) ? word : Suggest.closest(to: word, in: schemes) {
                return "\(scheme)://\(m.2)"
            }
        }
        // No scheme at all (`allowance.example.org`, `127.0.0.1:5000`): the first of `schemes` in front.
        guard !t.contains("://"), t.first?.isLetter == true || t.first?.isNumber == true else { return nil }
        return "\(schemes[0])://\(t)"
    }
}
