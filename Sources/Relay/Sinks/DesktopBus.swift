import CSystemd
import Core
import Foundation
import Synchronization

/// One connection to the session bus for a desktop sink: its popups are sent on it, and the notification server's
/// `ActionInvoked` signals for them come back on it (the server answers the connection that made the popup). A
/// thread waits on the connection's socket and hands each click to `onAction`. sd-bus is not thread-safe: every
/// use of the connection holds `bus`'s lock. A connection that breaks (the session's bus restarted) is dropped and
/// opened again by the next call.
final class DesktopBus: @unchecked Sendable {
    // @unchecked: `listener` is written once before the thread starts; the connection is behind `bus`.
    private let bus = Mutex<OpaquePointer?>(nil)
    private let listener = UnsafeMutablePointer<clsd_action_listener>.allocate(capacity: 1)
    private let running = Atomic<Bool>(false)
    private let stopped = Atomic<Bool>(false)
    private let onAction = Mutex<(@Sendable (UInt32, String) -> Void)?>(nil)

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
                    return .failure(RelayError(.desktopBus, String(cString: err)))
                }
                listener.pointee = clsd_action_listener(
                    callback: onActionInvoked, context: Unmanaged.passUnretained(self).toOpaque())
                if clsd_listen_actions(connection, listener, &err, err.count) < 0 {
                    clsd_free(connection)
                    return .failure(RelayError(.desktopBus, String(cString: err)))
                }
                b = connection
            }
            let r = body(b!, &err, err.count)
            guard r >= 0 else { return .failure(RelayError(.desktopBus, String(cString: err))) }
            return .success(r)
        }
        if case .success = result { startListening() }
        return result
    }

    /// Ends the thread and the connection.
    func close() {
        stopped.store(true, ordering: .releasing)
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

    /// Waits for the socket (a quarter second at most, so that `close` is seen), then lets sd-bus handle what came:
    /// signals end up in `onActionInvoked`.
    private func listen() {
        while !stopped.load(ordering: .acquiring) {
            let fd = bus.withLock { b in b.map { clsd_fd($0) } ?? -1 }
            if fd < 0 {
                Thread.sleep(forTimeInterval: 0.25)
                continue
            }
            var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            _ = poll(&p, 1, 250)
            bus.withLock { b in
                guard let connection = b else { return }
                var r: Int32 = 1
                while r > 0 { r = clsd_process(connection) }
                if r < 0 {
                    clsd_free(connection)
                    b = nil
                }
            }
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
