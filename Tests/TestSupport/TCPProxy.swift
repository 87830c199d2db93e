import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// A TCP proxy on loopback between a client and a server, for network faults without a FIN: `blackhole` keeps
/// every socket open but forwards nothing either way (a cable pulled, a NAT entry dropped), and new connections
/// are accepted and then left hanging too. `pass` forwards again (for new connections; old ones stay dead, as
/// after a real outage). `delay` holds every chunk for a while before it goes on, in order (a slow or congested
/// path; packet loss looks the same to TCP's user: late bytes). `resetAll()` ends every open connection with an
/// RST (a NAT or firewall that dropped its state). Blocking sockets, a thread per direction: simple, and the
/// test's own loop stays free.
public final class TCPProxy: Sendable {
    public enum Mode: Sendable, Equatable {
        case pass, blackhole
        case delay(Duration)
    }

    public let port: Int
    private let listener: Int32
    private let targetPort: Int
    private let state = Mutex<(mode: Mode, sockets: [Int32], closed: Bool, accepted: Int, resetting: Set<Int32>)>(
        (.pass, [], false, 0, []))

    public init(to targetPort: Int) throws {
        self.targetPort = targetPort
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var addr = Self.loopback(port: 0)
        let bound = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard bound == 0, listen(fd, 64) == 0 else { throw HarnessError("the proxy cannot listen") }
        var got = sockaddr_in()
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &got) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &len) }
        }
        listener = fd
        port = Int(UInt16(bigEndian: got.sin_port))
        let thread = Thread { [self] in acceptLoop() }
        thread.start()
    }

    public var mode: Mode {
        get { state.withLock { $0.mode } }
        set { state.withLock { $0.mode = newValue } }
    }

    /// Ends every open connection at once with an RST, both ways; new connections are accepted as the mode says.
    public func resetAll() {
        let sockets = state.withLock { s -> [Int32] in
            defer { s.sockets = [] }
            s.resetting.formUnion(s.sockets)
            return s.sockets
        }
        var linger = Glibc.linger(l_onoff: 1, l_linger: 0)  // close() then sends RST instead of FIN
        for fd in sockets {
            setsockopt(fd, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<Glibc.linger>.size))
            shutdown(fd, Int32(SHUT_RD))  // wakes the pump reading it, which closes it (one owner per fd)
        }
    }

    /// Connections accepted so far (the client's attempts, including the hanging ones).
    public var accepted: Int { state.withLock { $0.accepted } }

    public func close() {
        let sockets = state.withLock { s -> [Int32] in
            s.closed = true
            return s.sockets
        }
        shutdown(listener, Int32(SHUT_RDWR))
        Glibc.close(listener)
        for fd in sockets { shutdown(fd, Int32(SHUT_RDWR)) }
    }

    private static func loopback(port: Int) -> sockaddr_in {
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = in_port_t(UInt16(port).bigEndian)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        return addr
    }

    private func acceptLoop() {
        while true {
            let client = accept(listener, nil, nil)
            guard client >= 0 else { return }
            let blackholed = state.withLock { s -> Bool in
                s.accepted += 1
                s.sockets.append(client)
                return s.mode == .blackhole
            }
            if blackholed { continue }  // accepted, never answered: the client waits for its own timeout
            let server = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var addr = Self.loopback(port: targetPort)
            let ok = withUnsafePointer(to: &addr) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    connect(server, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
            guard ok == 0 else {
                Glibc.close(client)
                Glibc.close(server)
                continue
            }
            state.withLock { $0.sockets.append(server) }
            Thread { [self] in pump(from: client, to: server) }.start()
            Thread { [self] in pump(from: server, to: client) }.start()
        }
    }

    /// Copies bytes until either side ends; in blackhole mode it reads and drops them (no FIN, no RST).
    private func pump(from: Int32, to: Int32) {
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = buffer.withUnsafeMutableBytes { read(from, $0.baseAddress, $0.count) }
            if n <= 0 { break }
            let mode = state.withLock { $0.mode }
            if mode == .blackhole { continue }
            if case .delay(let d) = mode {
                Thread.sleep(forTimeInterval: Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18)
            }
            var sent = 0
            while sent < n {
                let w = buffer.withUnsafeBytes { send(to, $0.baseAddress! + sent, n - sent, Int32(MSG_NOSIGNAL)) }
                if w <= 0 { break }
                sent += w
            }
        }
        let reset = state.withLock { $0.resetting.remove(from) != nil }
        if reset {
            Glibc.close(from)  // linger 0: an RST to this side
        } else if !state.withLock({ $0.mode == .blackhole }) {
            shutdown(to, Int32(SHUT_WR))
        }
    }
}
