import Core
import Dispatch
import Foundation

/// Where the process starts: the relay's own default executor first, before any task exists (libdispatch's pool,
/// the default otherwise, wakes the process every second for good once its first worker has run: see
/// `DefaultExecutor`), then the command. The main queue stays libdispatch's, drained by `dispatchMain`.
@main enum Entry {
    static func main() {
        DefaultExecutor.install()
        Task.detached {
            await RelayCommand.main()
            Foundation.exit(0)
        }
        dispatchMain()
    }
}
