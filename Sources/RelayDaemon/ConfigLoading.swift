import AllowanceAPI
import Config
import Foundation
import Relay

/// The whole configuration of the daemon, as `run`, a SIGHUP reload and `config check` read it: the file once, the
/// environment on top, every mistake of both at once (a `ConfigErrors`, said the same way by all three).
public enum DaemonConfiguration {
    /// Settings and relay config from `file` (parsed once) and the environment, with the secret files checked.
    public static func load(
        file: String?, environment: [String: String]
    ) async throws(ConfigErrors) -> (RelaySettings, AlertSettings) {
        // Read once, for the settings and the relay alike; a new source each time (a reload reads the file as it is).
        let values = try ConfigSource(file: file, environment: environment).values()
        var errors: [ConfigError] = []
        var settings: RelaySettings?
        do {
            settings = try await RelaySettings.load(values)
        } catch {
            errors += error.all
        }
        if let settings { errors += settings.secretFileErrors(values) }
        var relay = AlertSettings()
        do {
            relay = try AlertSettings.parse(values)
        } catch {
            errors += error.all
        }
        guard errors.isEmpty, let settings else { throw ConfigErrors(merging: errors) }
        return (settings, relay)
    }
}
