import Foundation
import StoreContract
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// One relay per SQLite file: an exclusive `flock` on `<database>.lock`, held for the relay's whole run. The file's
/// ledger has no claims, so a second relay started on the same file must not send from it: it waits as a standby
/// and takes over when the first one ends, however it ends (the system lets go of the lock of a dead process). The
/// CLI's commands do not take it: they read the file beside the running relay as before.
public final class FileLease: Lease {
    public let path: String
    private let descriptor = Mutex<Int32?>(nil)

    public init(database: String) {
        path = database + ".lock"
    }

    public func tryAcquire() throws -> Bool {
        try descriptor.withLock { fd in
            if fd != nil { return true }
            let opened = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
            guard opened >= 0 else {
                throw StoreError(
                    path: path,
                    "Cannot open the relay's lock file (\(String(cString: strerror(errno)))). Check the folder's owner and permissions.",
                    code: .notWritable)
            }
            guard flock(opened, LOCK_EX | LOCK_NB) == 0 else {
                close(opened)
                return false
            }
            fd = opened
            return true
        }
    }

    public var isHeld: Bool { descriptor.withLock { $0 != nil } }

    public func release() {
        descriptor.withLock { fd in
            if let held = fd { close(held) }  // closing the descriptor lets go of the lock
            fd = nil
        }
    }
}
