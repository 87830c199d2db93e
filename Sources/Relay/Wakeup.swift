import Synchronization

/// A wake-up call for a sleeping worker: `signal()` from anywhere; `wait(upTo:)` returns at the first signal
/// (or one that came while it was not waiting), at the timeout, or when the task is cancelled.
final class Wakeup: Sendable {
    private let state = Mutex<(pending: Bool, waiter: CheckedContinuation<Void, Never>?)>((false, nil))

    func signal() {
        let waiter = state.withLock { s -> CheckedContinuation<Void, Never>? in
            guard let w = s.waiter else {
                s.pending = true
                return nil
            }
            s.waiter = nil
            return w
        }
        waiter?.resume()
    }

    /// `evenIfCancelled`: a cancelled task still waits (for a signal or the timeout) rather than returning at once.
    func wait(upTo timeout: Duration, evenIfCancelled: Bool = false) async {
        // Only a timer that ran out signals: a cancelled one (the wait ended earlier) must not leave a pending
        // signal behind, or every next wait would return at once and the worker would spin.
        let timer = Task {
            guard (try? await Task.sleep(for: timeout)) != nil else { return }
            self.signal()
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
                let now = state.withLock { s -> Bool in
                    if s.pending || (Task.isCancelled && !evenIfCancelled) {
                        s.pending = false
                        return true
                    }
                    s.waiter = c
                    return false
                }
                if now { c.resume() }
            }
        } onCancel: {
            if !evenIfCancelled { self.signal() }
        }
        timer.cancel()
    }
}
