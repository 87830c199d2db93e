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
            for mapping in smaps.withUnsafeBufferPointer({ Mapping.releasable(in: $0) })
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
            var text = smaps
            return text.withUTF8 { releasable(in: $0) }
        }

        /// Read byte by byte: the settled relay's smaps is thousands of lines, and splitting them into strings took
        /// about 50 ms of CPU, once, a minute into every run (perf on the soak, BENCHMARKS.md session 45).
        static func releasable(in smaps: UnsafeBufferPointer<UInt8>) -> [Mapping] {
            var found: [Mapping] = []
            var current: (mapping: Mapping, candidate: Bool, anonymous: Int)?
            func finish() {
                if let c = current, c.candidate, c.anonymous == 0, c.mapping.residentKiB > 0 { found.append(c.mapping) }
            }
            var rest = smaps[...]
            while !rest.isEmpty {
                let end = rest.firstIndex(of: UInt8(ascii: "\n")) ?? rest.endIndex
                var fields = Fields(rest[rest.startIndex..<end])
                rest = rest[min(end + 1, rest.endIndex)...]
                guard let first = fields.next() else { continue }
                if let dash = first.firstIndex(of: UInt8(ascii: "-")) {
                    // "start-end perms offset dev inode [path]"
                    guard let perms = fields.next(), fields.next() != nil, fields.next() != nil,
                        let inode = fields.next()
                    else { continue }
                    finish()
                    guard let lo = number(first[..<dash], radix: 16), let hi = number(first[(dash + 1)...], radix: 16),
                        hi >= lo, let length = Int(exactly: hi - lo)
                    else {
                        current = nil
                        continue
                    }
                    let candidate =
                        perms.count == 4 && perms[perms.startIndex + 1] == UInt8(ascii: "-")
                        && perms[perms.startIndex + 3] == UInt8(ascii: "p")
                    let fileBacked = (number(inode, radix: 10) ?? 0) != 0
                    current = (Mapping(start: lo, length: length, residentKiB: 0), candidate && fileBacked, -1)
                } else if current != nil, let value = fields.next() {
                    if first.elementsEqual("Rss:".utf8) {
                        current!.mapping.residentKiB = number(value, radix: 10).flatMap { Int(exactly: $0) } ?? 0
                    } else if first.elementsEqual("Anonymous:".utf8) {
                        current!.anonymous = number(value, radix: 10).flatMap { Int(exactly: $0) } ?? -1
                    }
                }
            }
            finish()
            return found
        }

        /// The fields of one line, split at spaces.
        private struct Fields: IteratorProtocol {
            var rest: Slice<UnsafeBufferPointer<UInt8>>
            init(_ line: Slice<UnsafeBufferPointer<UInt8>>) { rest = line }

            mutating func next() -> Slice<UnsafeBufferPointer<UInt8>>? {
                guard let start = rest.firstIndex(where: { $0 != UInt8(ascii: " ") }) else { return nil }
                let end = rest[start...].firstIndex(of: UInt8(ascii: " ")) ?? rest.endIndex
                defer { rest = rest[end...] }
                return rest[start..<end]
            }
        }

        /// The digits as a number (nil: empty, not a digit, or too large).
        private static func number(_ digits: Slice<UnsafeBufferPointer<UInt8>>, radix: UInt) -> UInt? {
            guard !digits.isEmpty else { return nil }
            var value: UInt = 0
            for byte in digits {
                let digit: UInt
                switch byte {
                case 0x30...0x39: digit = UInt(byte - 0x30)  // 0-9
                case 0x61...0x66 where radix == 16: digit = UInt(byte - 0x61) + 10  // a-f
                case 0x41...0x46 where radix == 16: digit = UInt(byte - 0x41) + 10  // A-F
                default: return nil
                }
                let (shifted, overflow) = value.multipliedReportingOverflow(by: radix)
                guard !overflow, shifted <= UInt.max - digit else { return nil }
                value = shifted + digit
            }
            return value
        }
    }

    #if os(Linux)
        private static func readAll(_ path: String) -> [UInt8]? {
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
            return bytes
        }
    #endif
}
