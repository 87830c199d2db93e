import Core
import Foundation
import Testing

/// `poll`, the kernel's own answer, is the oracle: the descriptor is readable after a signal and until a drain.
@Suite struct PollWakeTests {
    func readable(_ wake: PollWake) -> Bool {
        var p = pollfd(fd: wake.fd, events: Int16(POLLIN), revents: 0)
        return poll(&p, 1, 0) == 1
    }

    @Test func aSignalMakesItReadableUntilADrain() {
        let wake = PollWake()
        #expect(wake.fd >= 0)
        #expect(!readable(wake))
        wake.signal()
        wake.signal()
        #expect(readable(wake))
        wake.drain()
        #expect(!readable(wake), "one drain takes every signal")
        wake.signal()
        #expect(readable(wake))
    }

    @Test func aSignalFromAnotherThreadEndsAPollThatHadNoTimeout() async {
        let wake = PollWake()
        // On a thread of its own: a poll without a timeout must not hold one of the pool's threads.
        let ended = Task {
            await offThread(named: "poll-wait") { () -> Int32 in
                var p = pollfd(fd: wake.fd, events: Int16(POLLIN), revents: 0)
                return poll(&p, 1, -1)
            }
        }
        try? await Task.sleep(for: .milliseconds(100))
        wake.signal()
        #expect(await ended.value == 1)
    }

    @Test func manySignalsNeitherBlockNorFailAndOneDrainTakesThemAll() {
        let wake = PollWake()
        for _ in 0..<100_000 { wake.signal() }  // more than a pipe would hold (64 KiB): none may block
        #expect(readable(wake))
        wake.drain()
        #expect(!readable(wake))
    }
}
