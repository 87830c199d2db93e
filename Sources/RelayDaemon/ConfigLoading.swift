import AllowanceAPI
import Config
import Foundation
import Relay

/// A configuration `run` would refuse, said the same way by `run`, a SIGHUP reload and `config check`: every
/// mistake of the file and the environment at once.
public struct ConfigProblem: Error {
    public let errors: [ConfigError]

    public init(errors: [ConfigError]) { self.errors = errors }
    /// One line, for the log.
    public var message: String { errors.map(\.description).joined(separator: "; ") }

    /// What `run` and `config check` print: one line per mistake, like a compiler's.
    public var report: String {
        let head = errors.count == 1 ? "allowance-relay: configuration error:" : "allowance-relay: \(errors.count) configuration errors:"
        return ([head] + errors.map { "  " + $0.description }).joined(separator: "\n") + "\n"
    }

    /// Settings and relay config from `file` (parsed once) and the environment, with the secret files checked.
    public static func load(file: String?, environment: [String: String]) async throws(ConfigProblem) -> (RelaySettings, RelayConfig) {
        let parsed: ConfigFile?
        do {
            parsed = try file.map { path throws(ConfigErrors) in try ConfigFile.read(path) }
        } catch {
            throw ConfigProblem(errors: error.all)
        }
        let values = ConfigValues(parsed, environment)  // read once, for the settings and the relay alike
        var errors: [ConfigError] = []
        var settings: RelaySettings?
        do {
            settings = try await RelaySettings.load(values)
        } catch {
            errors += error.all
        }
        if let settings { errors += settings.secretFileErrors(values) }
        var relay = RelayConfig()
        do {
            relay = try RelayConfig.parse(values)
        } catch {
            errors += error.all
        }
        guard errors.isEmpty, let settings else {
            var seen = Set<String>()
            throw ConfigProblem(errors: errors.filter { seen.insert($0.description).inserted }.sorted { ($0.line, $0.column) < ($1.line, $1.column) })
        }
        return (settings, relay)
    }
}
