import Foundation
import Synchronization
import Testing

/// A stand-in for systemd's notification socket: a Unix datagram socket that collects what the relay says.
final class NotifySocket: Sendable {
    let path = FileManager.default.temporaryDirectory.appending(path: "notify-\(UUID().uuidString.prefix(8)).sock").path
    private let fd: Int32
    private let messages = Mutex<[String]>([])

    init() throws {
        fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue), 0)
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &addr.sun_path) { raw in
            for (i, b) in path.utf8.enumerated() where i < raw.count - 1 { raw[i] = b }
        }
        let bound = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard bound == 0 else { throw POSIXError(.EADDRINUSE) }
        var timeout = timeval(tv_sec: 0, tv_usec: 100_000)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        Thread.detachNewThread { [self] in
            var buffer = [UInt8](repeating: 0, count: 4096)
            while true {
                let n = recv(fd, &buffer, buffer.count, 0)
                if n > 0 { messages.withLock { $0.append(String(decoding: buffer[0..<n], as: UTF8.self)) } }
                if n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR) { return }
            }
        }
    }

    var received: [String] { messages.withLock { $0 } }

    func close() {
        shutdown(fd, Int32(SHUT_RDWR))
        Foundation.close(fd)
        unlink(path)
    }
}

@Suite(.serialized, .timeLimit(.minutes(1))) struct SystemdNotifyTests {
    @Test func readyStatusWatchdogAndStoppingReachTheNotifySocket() async throws {
        let notify = try NotifySocket()
        defer { notify.close() }
        try await withSim { base in
            let relay = try RelayProcess(env: [
                "ALLOWANCE_RELAY_SERVER_URL": base.absoluteString, "ALLOWANCE_RELAY_SERVER_TOKEN": "e2e-token",
                "NOTIFY_SOCKET": notify.path, "WATCHDOG_USEC": "200000",
            ])
            #expect(await relay.waitFor("connected to the hub"))
            // Each wait is for what the socket is told, with a deadline (no guessed sleep).
            func until(_ what: String, _ condition: ([String]) -> Bool) async {
                let deadline = ContinuousClock.now + .seconds(10)
                while !condition(notify.received) {
                    guard ContinuousClock.now < deadline else {
                        Issue.record("the notify socket never got \(what): \(notify.received)")
                        return
                    }
                    try? await Task.sleep(for: .milliseconds(10))
                }
            }
            await until("two watchdog pings") { $0.filter { $0 == "WATCHDOG=1" }.count >= 2 }
            await relay.expectCleanStop()
            await until("STOPPING=1") { $0.contains { $0.hasPrefix("STOPPING=1") } }
            let said = notify.received
            #expect(said.first?.hasPrefix("READY=1\nSTATUS=connecting to 127.0.0.1") == true, "\(said)")
            #expect(said.contains("STATUS=connected to the hub"))
            #expect(said.filter { $0 == "WATCHDOG=1" }.count >= 2, "pinged at half of WatchdogSec")
            #expect(said.contains("STOPPING=1\nSTATUS=stopping"))
        }
    }
}
