import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Where a popup's picture lives while the notification server shows it: the spec's `image-path` names a file, read
/// by the server when it draws the popup, so the file must outlast the call. One file per child (`chart-<id>.png`),
/// replaced by the child's next summary, in a folder only this user can read (a child's balance is the family's
/// business): `$XDG_RUNTIME_DIR/allowance-relay` (a tmpfs the session's end clears), else a folder of the user's own
/// in the temporary directory.
struct DesktopPictures {
    let folder: String

    init(environment: [String: String] = ProcessInfo.processInfo.environment) {
        if let runtime = environment["XDG_RUNTIME_DIR"], runtime.hasPrefix("/") {
            folder = runtime + "/allowance-relay"
        } else {
            folder = NSTemporaryDirectory() + "allowance-relay-\(getuid())"
        }
    }

    /// Writes `png` as `name`'s picture and returns its path. The folder is made with mode 0700 and must be a real
    /// folder of this user's (not a link another user planted in /tmp); the file is written beside and renamed, so
    /// the server never reads half a picture.
    func store(_ png: [UInt8], as name: String) throws -> String {
        if mkdir(folder, 0o700) != 0, errno != EEXIST {
            throw Failure("cannot make \(folder): \(String(cString: strerror(errno)))")
        }
        var info = stat()
        guard lstat(folder, &info) == 0, info.st_mode & S_IFMT == S_IFDIR, info.st_uid == getuid(),
            info.st_mode & 0o077 == 0
        else {
            throw Failure("\(folder) is not a folder of this user's alone (mode 0700): not writing pictures there")
        }
        let path = folder + "/" + name
        let part = path + ".part"
        let fd = open(part, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard fd >= 0 else { throw Failure("cannot write \(part): \(String(cString: strerror(errno)))") }
        let written = png.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        close(fd)
        guard written == png.count, rename(part, path) == 0 else {
            unlink(part)
            throw Failure("cannot write \(path): \(String(cString: strerror(errno)))")
        }
        return path
    }

    struct Failure: Error, CustomStringConvertible {
        let description: String
        init(_ description: String) { self.description = description }
    }
}
