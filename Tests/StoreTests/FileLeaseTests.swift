import Core
import Foundation
import Store
import StoreContract
import TestSupport
import Testing

/// The SQLite file's lease against real processes holding the same lock (`flock(2)`, taken by util-linux's `flock` in
/// a shell): a standby sleeps until the holder's process ends, and tries once a second only when the holder cannot
/// be watched.
@Suite(.timeLimit(.minutes(1))) struct FileLeaseTests {
    /// How the holder describes itself in the lock file, if at all.
    enum Says { case nothing, itself, aStaleStartTime }

    @Test func theHolderWritesWhoItIsIntoTheLockFile() throws {
        let lease = FileLease(database: try database())
        #expect(try lease.tryAcquire())
        defer { lease.release() }
        let line = try String(contentsOfFile: lease.path, encoding: .utf8)
        #expect(line.contains("pid=\(getpid()) "), "\(line)")
        #expect(line.contains("started=\(try startTime(of: getpid())) "), "\(line)")
        #expect(line.contains("boot=\(try bootID())"), "\(line)")
    }

    @Test func aStandbySleepsUntilTheHoldersProcessEndsAndThenHoldsTheLease() async throws {
        let lease = FileLease(database: try database())
        let holder = try await Holder(lease.path, says: .itself)
        let (granted, wake) = standby(lease, named: "lease-watched")
        defer { wake.signal() }
        let woke = try await ProcessThreads.sleeps(of: getpid(), named: "lease-watched", over: .seconds(3))
        // A try each second shows three times in the window.
        #expect(woke != nil && woke! <= 1, "the standby's thread woke \(woke ?? -1) times in 3 s")
        #expect(try lease.tryAcquire() == false, "still the holder's")
        let killed = ContinuousClock.now
        holder.kill()
        #expect(try await granted.value, "held once the holder ended")
        #expect(lease.isHeld)
        print("FileLeaseTests: granted \(ContinuousClock.now - killed) after the holder was killed")
        lease.release()
    }

    @Test(arguments: [Says.nothing, .aStaleStartTime])
    func aHolderItCannotWatchIsTriedEachSecond(_ says: Says) async throws {
        let lease = FileLease(database: try database())
        let holder = try await Holder(lease.path, says: says)
        let name = says == .nothing ? "lease-unknown" : "lease-stale"
        let (granted, wake) = standby(lease, named: name)
        defer { wake.signal() }
        let woke = try await ProcessThreads.sleeps(of: getpid(), named: name, over: .seconds(3))
        #expect(woke != nil && woke! >= 2, "the standby's thread woke \(woke ?? -1) times in 3 s: it should try")
        holder.kill()
        #expect(try await granted.value)
        lease.release()
    }

    /// A relay in this process holds the file (the in-process tests): another lease here cannot watch its own
    /// process, so it tries each second and takes the lock once the first lets go.
    @Test func aHolderInThisProcessIsTakenOverOnceItLetsGo() async throws {
        let path = try database()
        let first = FileLease(database: path)
        let second = FileLease(database: path)
        #expect(try first.tryAcquire())
        let (granted, wake) = standby(second, named: "lease-in-proc")
        defer { wake.signal() }
        #expect(await ProcessThreads.asleep("lease-in-proc"), "the standby waits")
        first.release()
        #expect(try await granted.value)
        #expect(second.isHeld && !first.isHeld)
        second.release()
    }

    @Test func theWakeEndsTheWaitWithoutTheLease() async throws {
        let lease = FileLease(database: try database())
        let holder = try await Holder(lease.path, says: .itself)
        defer { holder.kill() }
        let (granted, wake) = standby(lease, named: "lease-woken")
        #expect(await ProcessThreads.asleep("lease-woken"), "the standby waits")
        wake.signal()
        #expect(try await granted.value == false)
        #expect(!lease.isHeld)
    }

    // MARK: - Helpers

    private func database() throws -> String {
        let folder = FileManager.default.temporaryDirectory.appending(path: "file-lease-\(UUID())")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        return folder.appending(path: "relay.sqlite").path
    }

    /// `lease.acquire` on a thread of its own, named for the test (tests run side by side), and the wake that ends it.
    private func standby(_ lease: FileLease, named name: String) -> (Task<Bool, any Error>, PollWake) {
        let wake = PollWake()
        return (Task { try await offThread(named: name) { try lease.acquire(until: wake) } }, wake)
    }

    /// A process holding the lock on `path` until killed: a shell that takes it with `flock` and then becomes
    /// `sleep` (one process, holding the lock's descriptor), described in the lock file as `says` asks, in the
    /// file's format as a relay writes it.
    private struct Holder {
        let process: Process

        init(_ path: String, says: Says) async throws {
            process = Process()
            process.executableURL = URL(fileURLWithPath: "/bin/sh")
            process.arguments = ["-c", "exec 9>\"$0\" && flock --exclusive 9 && echo locked && exec sleep 60", path]
            let out = Pipe()
            process.standardOutput = out
            try process.run()
            let line = try await offThread(named: "test-holder") { () throws -> Data in
                try out.fileHandleForReading.read(upToCount: 7) ?? Data()
            }
            guard String(decoding: line, as: UTF8.self) == "locked\n" else { throw HolderFailed() }
            let pid = process.processIdentifier
            var started = try startTime(of: pid)
            switch says {
            case .nothing: return
            case .itself: break
            case .aStaleStartTime: started -= 1  // the id as another, earlier process had it
            }
            let namespace = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/ns/pid")
            let text = "allowance-relay pid=\(pid) started=\(started) pidns=\(namespace) boot=\(try bootID())\n"
            try text.write(toFile: path, atomically: false, encoding: .utf8)
        }

        func kill() {
            Glibc.kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
    }

    private struct HolderFailed: Error {}
}

/// Process `pid`'s start time in clock ticks after boot (`/proc/PID/stat`, field 22), read here, not by the lease.
private func startTime(of pid: Int32) throws -> UInt64 {
    let stat = try String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8)
    let fields = stat[stat.index(after: stat.lastIndex(of: ")")!)...].split(separator: " ")
    return UInt64(fields[19])!
}

private func bootID() throws -> String {
    try String(contentsOfFile: "/proc/sys/kernel/random/boot_id", encoding: .utf8)
        .trimmingCharacters(in: .whitespacesAndNewlines)
}
