import AllowanceAPI
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
        var errors: [ConfigError] = []
        var settings: RelaySettings?
        do {
            settings = try await RelaySettings.load(parsed, environment: environment)
        } catch {
            errors += error.all
        }
        if let settings {
            let values = ConfigValues(parsed, environment)
            for (key, path) in [("server.token_file", settings.tokenFile), ("server.password_file", settings.password == nil ? settings.passwordFile : nil)] {
                guard let path else { continue }
                do { _ = try Secret.read(file: path, what: key == "server.token_file" ? "token file" : "password file") } catch {
                    errors.append(values.error(key, error.problem, fix: error.fix ?? "check the file"))
                }
            }
        }
        var relay = RelayConfig()
        do {
            if let parsed { relay = try RelayConfig.parse(parsed, environment: environment) }
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
