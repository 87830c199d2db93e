import UnixSignals

/// The process signals the daemon answers, trapped by the executable as early as it can: a signal that comes
/// before `Daemon.run` waits in its sequence and is acted on once the daemon runs (untrapped, SIGHUP and SIGUSR1
/// would end the process). The daemon traps none itself: a library that trapped process-wide signals would take
/// them from the program that embeds it (and each trap is a libdispatch source, torn down with the daemon).
public struct DaemonSignals: Sendable {
    /// SIGTERM and SIGINT: a graceful stop.
    public let stop: UnixSignalsSequence
    /// SIGHUP: the config file read again.
    public let reload: UnixSignalsSequence
    /// SIGUSR1: another process changed the database (`mute`, `transaction add`, `outbox retry`).
    public let databaseChanged: UnixSignalsSequence

    public static func trap() async -> DaemonSignals {
        DaemonSignals(
            stop: await UnixSignalsSequence(trapping: .sigterm, .sigint),
            reload: await UnixSignalsSequence(trapping: .sighup),
            databaseChanged: await UnixSignalsSequence(trapping: .sigusr1))
    }
}
