/// The RelayDaemon module's one error: what ends the daemon, with its exit code (documented in `run --help`) and
/// the reason. Configuration mistakes are `ConfigErrors` and the store's `StoreError`: the executable maps those.
struct DaemonError: Error, CustomStringConvertible {
    let exitCode: Int32
    let message: String
    var description: String { message }
}
