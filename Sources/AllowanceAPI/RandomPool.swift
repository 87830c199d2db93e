#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Synchronization

/// The random bits of new ids, read from the kernel 4 KiB at a time. The system generator makes one `getrandom`
/// call per 8 bytes: two system calls per id, and a blast of hub events plans a delivery (a new id) per event.
/// Ids need to be unique, not secret; the bytes come from the same kernel generator either way.
final class RandomPool: Sendable {
    static let shared = RandomPool()

    private struct Pool {
        var words = [UInt64](repeating: 0, count: 512)
        var used = 512
    }

    private let pool = Mutex(Pool())
    /// /dev/urandom, kept open; -1 where it cannot be opened (the system generator then serves each call).
    private let device: Int32 = open("/dev/urandom", O_RDONLY | O_CLOEXEC)

    /// 16 random bytes.
    func next() -> (UInt64, UInt64) {
        pool.withLock { p in
            if p.used + 2 > p.words.count {
                guard refill(&p.words) else {
                    var g = SystemRandomNumberGenerator()
                    return (g.next(), g.next())
                }
                p.used = 0
            }
            defer { p.used += 2 }
            return (p.words[p.used], p.words[p.used + 1])
        }
    }

    private func refill(_ words: inout [UInt64]) -> Bool {
        guard device >= 0 else { return false }
        return words.withUnsafeMutableBytes { b in
            var filled = 0
            while filled < b.count {
                let n = read(device, b.baseAddress! + filled, b.count - filled)
                if n > 0 {
                    filled += n
                } else if n < 0 && errno == EINTR {
                    continue
                } else {
                    return false
                }
            }
            return true
        }
    }
}
