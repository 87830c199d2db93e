import Alerts
import AllowanceAPI
import Config
import Foundation
import GRDB
import Logging
import Relay
import SignalRProtocol
import Store
import Synchronization
import TestSupport
import Testing

/// A hand-driven clock for the engine's waits: each `sleep` ends when the test fires it, or at once when its task is
/// cancelled (as `Task.sleep` does).
final class ManualTimer: Sendable {
    private struct State {
        var waiting: [UUID: CheckedContinuation<Void, Never>] = [:]
        var cancelledEarly: Set<UUID> = []
        var started = 0
        var cancelled = 0
    }
    private let state = Mutex(State())

    var waiting: Int { state.withLock { $0.waiting.count } }
    var started: Int { state.withLock { $0.started } }
    var cancelled: Int { state.withLock { $0.cancelled } }

    @Sendable func sleep(_: Duration) async {
        let id = UUID()
        state.withLock { $0.started += 1 }
        await withTaskCancellationHandler {
            await withCheckedContinuation { c in
                let now = state.withLock { s -> Bool in
                    if s.cancelledEarly.remove(id) != nil { return true }
                    s.waiting[id] = c
                    return false
                }
                if now { c.resume() }
            }
        } onCancel: {
            let c = state.withLock { s -> CheckedContinuation<Void, Never>? in
                s.cancelled += 1
                guard let c = s.waiting.removeValue(forKey: id) else {
                    s.cancelledEarly.insert(id)
                    return nil
                }
                return c
            }
            c?.resume()
        }
    }

    /// Ends every wait under way.
    func fire() {
        let all = state.withLock { s in
            defer { s.waiting = [:] }
            return Array(s.waiting.values)
        }
        for c in all { c.resume() }
    }
}
