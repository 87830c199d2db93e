/// xoshiro256** (Blackman and Vigna): a small, fast generator of well-spread 64-bit numbers, for ids, not secrets. The
/// system's generator costs a system call a number; this one, seeded from it once, none. Span and trace ids, and the
/// random bits of new UUIDs (`UUID.random`, `UUID.timeOrdered`), come from it.
public struct Xoshiro256StarStar: RandomNumberGenerator {
    private var s: (UInt64, UInt64, UInt64, UInt64)

    /// Seeded from the system's generator (four system calls, once).
    public init() {
        var system = SystemRandomNumberGenerator()
        repeat {
            s = (system.next(), system.next(), system.next(), system.next())
        } while s == (0, 0, 0, 0)
    }

    public mutating func next() -> UInt64 {
        let result = rotate(s.1 &* 5, 7) &* 9
        let t = s.1 << 17
        s.2 ^= s.0
        s.3 ^= s.1
        s.1 ^= s.2
        s.0 ^= s.3
        s.2 ^= t
        s.3 = rotate(s.3, 45)
        return result
    }

    private func rotate(_ x: UInt64, _ k: UInt64) -> UInt64 { (x << k) | (x >> (64 - k)) }
}
