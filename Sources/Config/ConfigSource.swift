import Foundation
import Synchronization

/// The configuration file and the environment as a command reads them: the file is read and parsed once, and the
/// settings, the relay's sections and the time zone are all taken from that one reading (they were read up to three
/// times, so a file edited meanwhile could give one command two configurations).
public struct ConfigSource: Sendable {
    public let file: String?
    public let environment: [String: String]
    private let parsed: Result<ConfigFile?, ConfigErrors>

    public init(file: String?, environment: [String: String] = ProcessInfo.processInfo.environment) {
        self.file = file
        self.environment = environment
        parsed = Result { () throws(ConfigErrors) -> ConfigFile? in try file.map { path throws(ConfigErrors) in try ConfigFile.read(path) } }
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
