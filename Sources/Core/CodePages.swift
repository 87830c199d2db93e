#if canImport(Glibc)
    import Glibc
#endif

/// The code the start ran and idling does not: let go of once the relay has settled.
///
/// Most of an idle relay's resident memory was clean code and read-only data mapped from its binary and libraries
/// (session 39: 42 of 48.7 MiB): the start touches far more code than idling runs (options, migrations, the first
/// catch-up), and the kernel maps the 16 pages around each page a fault brings in. Those pages stay mapped, counted
/// as the relay's, for as long as it runs. `release()` unmaps them (`MADV_DONTNEED`): the pages stay in the kernel's
/// page cache, and the next use of one maps it again from there (a minor fault, no disk read). Only private file
/// mappings that cannot be written and hold no copied page are released, so nothing but the file's own content is
/// dropped: what the kernel's reclaim does under memory pressure, done at once.
public enum CodePages {
    /// Releases them; returns how many KiB were resident in the mappings released (0 where /proc is not there).
    @discardableResult
    public static func release() -> Int {
        #if os(Linux)
            guard let smaps = readAll("/proc/self/smaps") else { return 0 }
            var released = 0
            for mapping in Mapping.releasable(in: smaps)
            where madvise(UnsafeMutableRawPointer(bitPattern: mapping.start), mapping.length, MADV_DONTNEED) == 0 {
                released += mapping.residentKiB
            }
            return released
        #else
            return 0
        #endif
    }

    /// One mapping of /proc/PID/smaps, as far as releasing it goes.
    struct Mapping: Equatable {
        var start: UInt
        var length: Int
        var residentKiB: Int

        /// The mappings that hold only their file's content: private, backed by a file (an inode), not writable,
        /// no anonymous (copied-on-write) page, something resident.
        static func releasable(in smaps: String) -> [Mapping] {
            var found: [Mapping] = []
            var current: (mapping: Mapping, candidate: Bool, anonymous: Int)?
            func finish() {
                if let c = current, c.candidate, c.anonymous == 0, c.mapping.residentKiB > 0 { found.append(c.mapping) }
            }
            for line in smaps.split(separator: "\n") {
                let fields = line.split(separator: " ", omittingEmptySubsequences: true)
                if let first = fields.first, first.contains("-"), fields.count >= 5 {
                    // "start-end perms offset dev inode [path]"
                    finish()
                    let bounds = first.split(separator: "-")
                    guard bounds.count == 2, let lo = UInt(bounds[0], radix: 16), let hi = UInt(bounds[1], radix: 16)
                    else {
                        current = nil
                        continue
                    }
                    let perms = Array(fields[1].utf8)
                    let fileBacked = (UInt(fields[4]) ?? 0) != 0
                    let candidate = perms.count == 4 && perms[1] == UInt8(ascii: "-") && perms[3] == UInt8(ascii: "p")
                    current = (Mapping(start: lo, length: Int(hi - lo), residentKiB: 0), candidate && fileBacked, -1)
                } else if fields.count >= 2, current != nil {
                    if fields[0] == "Rss:" {
                        current!.mapping.residentKiB = Int(fields[1]) ?? 0
                    } else if fields[0] == "Anonymous:" {
                        current!.anonymous = Int(fields[1]) ?? -1
                    }
                }
            }
            finish()
            return found
        }
    }

    #if os(Linux)
        private static func readAll(_ path: String) -> String? {
            let fd = open(path, O_RDONLY | O_CLOEXEC)
            guard fd >= 0 else { return nil }
            defer { close(fd) }
            var bytes: [UInt8] = []
            var chunk = [UInt8](repeating: 0, count: 64 * 1024)
            while true {
                let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
                if n < 0 && errno == EINTR { continue }
                guard n > 0 else { break }
                bytes += chunk[0..<n]
            }
            return String(decoding: bytes, as: UTF8.self)
        }
    #endif
}
