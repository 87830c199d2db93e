import Glibc
import Testing

@testable import Core

/// Letting go of the code the start ran: the process's file-backed resident memory goes down (read from
/// /proc/self/status, not through the code under test), the code still runs, and a page of a private mapping that
/// was written (copied on write) is never dropped: only what the file itself holds.
@Suite struct CodePagesTests {
    /// `RssFile` of /proc/self/status, in KiB.
    private func residentFileKiB() throws -> Int {
        let bytes = try readProc("/proc/self/status").prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }
        let status = try #require(String(validating: bytes, as: UTF8.self))
        let line = try #require(status.split(separator: "\n").first { $0.hasPrefix("RssFile:") })
        return try #require(Int(line.split(separator: " ", omittingEmptySubsequences: true)[1]))
    }

    private func readProc(_ path: String) throws -> [CChar] {
        let fd = open(path, O_RDONLY)
        try #require(fd >= 0)
        defer { close(fd) }
        var buffer = [CChar](repeating: 0, count: 1 << 16)
        let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count - 1) }
        try #require(n > 0)
        return buffer
    }

    @Test func theCodeMappedByTheStartIsLetGoOfAndStillRuns() throws {
        let before = try residentFileKiB()
        let released = CodePages.release()
        let after = try residentFileKiB()
        #expect(released > 1024, "released \(released) KiB")
        // Some of it is mapped again at once by the code running here; most is not.
        #expect(after < before - 1024, "RssFile \(before) -> \(after) KiB")
        // Code in the released pages runs again (mapped back from the page cache).
        let text = JSONValue.object([(key: "a", value: .array([.number("1"), .string("b")]))]).serialized
        #expect(text == #"{"a":[1,"b"]}"#)
    }

    @Test func aWrittenPageOfAPrivateFileMappingIsKept() throws {
        let path = "/tmp/codepages-\(getpid())"
        let fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0o600)
        try #require(fd >= 0)
        defer {
            close(fd)
            unlink(path)
        }
        let size = 3 * 4096
        var content = [UInt8](repeating: UInt8(ascii: "f"), count: size)
        try #require(write(fd, &content, size) == size)
        // Written (copied on write, as the loader's relocations are), then made read-only: it must not be dropped.
        let written = try #require(mmap(nil, size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0))
        written.storeBytes(of: UInt8(ascii: "w"), as: UInt8.self)
        try #require(mprotect(written, size, PROT_READ) == 0)
        // Only read: may be dropped, and reads the file's content again.
        let onlyRead = try #require(mmap(nil, size, PROT_READ, MAP_PRIVATE, fd, 0))
        #expect(onlyRead.load(fromByteOffset: 4096, as: UInt8.self) == UInt8(ascii: "f"))
        defer {
            munmap(written, size)
            munmap(onlyRead, size)
        }

        CodePages.release()

        #expect(written.load(as: UInt8.self) == UInt8(ascii: "w"), "the copied page was dropped")
        #expect(written.load(fromByteOffset: 4096, as: UInt8.self) == UInt8(ascii: "f"))
        #expect(onlyRead.load(fromByteOffset: 4096, as: UInt8.self) == UInt8(ascii: "f"))
    }

    /// What /proc/PID/smaps says, as the kernel writes it: only private, read-only, file-backed mappings without an
    /// anonymous page are released; the heap, a writable mapping, a shared one, a copied one and [vdso] are not.
    @Test func onlyMappingsHoldingNothingButTheirFileAreChosen() {
        let smaps = """
            5581a0000000-5581a0200000 r-xp 00010000 08:01 1234                       /usr/bin/allowance-relay
            Size:               2048 kB
            Rss:                1500 kB
            Anonymous:             0 kB
            5581a0200000-5581a0210000 r--p 00210000 08:01 1234                       /usr/bin/allowance-relay
            Size:                 64 kB
            Rss:                  64 kB
            Anonymous:            64 kB
            5581a0210000-5581a0220000 rw-p 00220000 08:01 1234                       /usr/bin/allowance-relay
            Size:                 64 kB
            Rss:                  64 kB
            Anonymous:             8 kB
            5581a1000000-5581a1100000 rw-p 00000000 00:00 0                          [heap]
            Size:               1024 kB
            Rss:                 900 kB
            Anonymous:           900 kB
            7f0000000000-7f0000100000 r--s 00000000 08:01 99                         /var/lib/relay.sqlite-shm
            Size:               1024 kB
            Rss:                  32 kB
            Anonymous:             0 kB
            7f0000200000-7f0000300000 r--p 00000000 08:01 555                        /usr/lib/x86_64-linux-gnu/libc.so.6
            Size:               1024 kB
            Rss:                   0 kB
            Anonymous:             0 kB
            7f0000300000-7f0000400000 r-xp 00028000 08:01 555                        /usr/lib/x86_64-linux-gnu/libc.so.6
            Size:               1024 kB
            Rss:                 700 kB
            Anonymous:             0 kB
            7ffd00000000-7ffd00002000 r-xp 00000000 00:00 0                          [vdso]
            Size:                  8 kB
            Rss:                   4 kB
            Anonymous:             0 kB
            """
        #expect(
            CodePages.Mapping.releasable(in: smaps) == [
                .init(start: 0x5581_a000_0000, length: 0x20_0000, residentKiB: 1500),
                .init(start: 0x7f00_0030_0000, length: 0x10_0000, residentKiB: 700),
            ])
    }

    /// A line the reader does not expect (an address too large, no end, letters for digits, a short header, a
    /// field without a value) is passed over, never a trap; the good mappings around them are still found.
    @Test func garbledLinesArePassedOver() {
        let smaps = """
            5581a0000000-5581a0200000 r-xp 00010000 08:01 1234                       /usr/bin/allowance-relay
            Rss:                1500 kB
            Anonymous:             0 kB
            0-1ffffffffffffffffffff r-xp 00000000 08:01 77 /huge
            Rss:                 100 kB
            Anonymous:             0 kB
            ffffffffffffffff-0 r-xp 00000000 08:01 78 /backwards
            Rss:                 100 kB
            Anonymous:             0 kB
            7f00zz000000-7f0000100000 r-xp 00000000 08:01 79 /letters
            Rss:                 100 kB
            Anonymous:             0 kB
            7f0000300000-7f0000400000 r-xp
            Rss:
            Anonymous:
            Rss:              99999999999999999999999 kB
            7f0000500000-7f0000600000 r-xp 00028000 08:01 555                        /usr/lib/libc.so.6
            Rss:                 700 kB
            Anonymous:             0 kB
            """
        #expect(
            CodePages.Mapping.releasable(in: smaps) == [
                .init(start: 0x5581_a000_0000, length: 0x20_0000, residentKiB: 1500),
                .init(start: 0x7f00_0050_0000, length: 0x10_0000, residentKiB: 700),
            ])
    }
}
