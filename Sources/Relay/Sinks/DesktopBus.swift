import CSystemd
import Core
import Foundation
import Synchronization

/// One connection to the session bus for a desktop sink: its popups are sent on it, and the notification server's
/// `ActionInvoked` signals for them come back on it (the server answers the connection that made the popup). A
/// thread waits on the connection's socket and hands each click to `onAction`; it sleeps until the bus has
/// something for it (no timer: on a laptop, a wake-up a quarter second was 14,000 an hour). sd-bus is not
/// thread-safe: every use of the connection holds `bus`'s lock. A connection that breaks (the session's bus
/// restarted) is dropped and opened again by the next call.
final class DesktopBus: @unchecked Sendable {
    // @unchecked: `listener` is written once before the thread starts; the connection is behind `bus`.
    private let bus = Mutex<OpaquePointer?>(nil)
    private let listener = UnsafeMutablePointer<clsd_action_listener>.allocate(capacity: 1)
    private let running = Atomic<Bool>(false)
    private let stopped = Atomic<Bool>(false)
    private let onAction = Mutex<(@Sendable (UInt32, String) -> Void)?>(nil)
    /// Wakes the listening thread: to stop, or to look again after a call (which may have opened a new connection,
    /// or read signals into sd-bus's queue while it waited for its answer).
    private let wake = PollWake()

    init() {
        listener.initialize(to: clsd_action_listener(callback: nil, context: nil))
    }

    /// Called with each click on a popup of this connection (its id and the action's key), on the bus's thread.
    func onAction(_ handler: @escaping @Sendable (UInt32, String) -> Void) {
        onAction.withLock { $0 = handler }
    }

    deinit {
        bus.withLock { b in
            if let connection = b { clsd_free(connection) }
            b = nil
        }
        listener.deallocate()
    }

    /// Runs `body` (a `clsd_*` call: its result, or < 0 with the reason in the error buffer) on the connection,
    /// opened if needed.
    func call(_ body: (OpaquePointer, UnsafeMutablePointer<CChar>, Int) -> Int32) -> Result<Int32, RelayError> {
        var err = [CChar](repeating: 0, count: 512)
        let result: Result<Int32, RelayError> = bus.withLock { b in
            if b == nil {
                var opened: OpaquePointer?
                guard clsd_open(&opened, &err, err.count) >= 0, let connection = opened else {
                    return .failure(RelayError(.desktopBus, Self.text(err)))
                }
                listener.pointee = clsd_action_listener(
                    callback: onActionInvoked, context: Unmanaged.passUnretained(self).toOpaque())
                if clsd_listen_actions(connection, listener, &err, err.count) < 0 {
                    clsd_free(connection)
                    return .failure(RelayError(.desktopBus, Self.text(err)))
                }
                b = connection
            }
            let r = body(b!, &err, err.count)
            guard r >= 0 else { return .failure(RelayError(.desktopBus, Self.text(err))) }
            return .success(r)
        }
        if case .success = result {
            startListening()
            wake.signal()
        }
        return result
    }

    /// The reason a `clsd_*` call wrote into `buffer`: its text up to the first NUL.
    private static func text(_ buffer: [CChar]) -> String {
        String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// `work` (its `call`s) on a thread of its own, for a sink's sends: sd-bus waits for the server's answer (10 s
    /// for a popup, 25 for the rest), and a notification server that hangs must not hold the caller's thread that
    /// long. The relay's thread also runs the other sinks, the store's writer and the HTTP client.
    func perform<T: Sendable>(_ work: @escaping @Sendable (DesktopBus) -> T) async -> T {
        await offThread(named: "desktop-call") { [self] in work(self) }
    }

    /// Ends the thread and the connection.
    func close() {
        stopped.store(true, ordering: .releasing)
        wake.signal()
    }

    fileprivate func invoked(_ id: UInt32, _ key: String) { onAction.withLock { $0 }?(id, key) }

    private func startListening() {
        guard running.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged else {
            return
        }
        let thread = Thread { [self] in
            ThreadName.set("desktop-bus")
            listen()
        }
        thread.start()
    }

    /// Lets sd-bus handle what came (signals end up in `onActionInvoked`), then sleeps until the socket has more,
    /// sd-bus's own deadline passes, or `wake` is signalled (a call was made, or `close`).
    private func listen() {
        while !stopped.load(ordering: .acquiring) {
            let waitFor = bus.withLock { b -> (fd: Int32, events: Int16, timeout: Int32)? in
                guard let connection = b else { return nil }
                var r: Int32 = 1
                while r > 0 { r = clsd_process(connection) }
                var events: Int16 = 0
                var timeout: Int32 = -1
                if r < 0 || clsd_wait_spec(connection, &events, &timeout) < 0 {
                    clsd_free(connection)
                    b = nil
                    return nil
                }
                return (clsd_fd(connection), events, timeout)
            }
            var fds = [pollfd(fd: wake.fd, events: Int16(POLLIN), revents: 0)]
            if let waitFor { fds.append(pollfd(fd: waitFor.fd, events: waitFor.events, revents: 0)) }
            // Without a connection (it broke): nothing to wait for until the next call opens one and signals.
            _ = poll(&fds, nfds_t(fds.count), waitFor?.timeout ?? -1)
            if fds[0].revents != 0 { wake.drain() }
        }
        bus.withLock { b in
            if let connection = b { clsd_free(connection) }
            b = nil
        }
    }
}

/// sd-bus calls this from `clsd_process`, with the bus's lock held: the click is handed on, not handled here.
private func onActionInvoked(_ id: UInt32, _ key: UnsafePointer<CChar>?, _ context: UnsafeMutableRawPointer?) {
    guard let key, let context else { return }
    Unmanaged<DesktopBus>.fromOpaque(context).takeUnretainedValue().invoked(id, String(cString: key))
}
