import Core
import PostgresTransport

/// Runs `work` on this replica only while it holds `lease`: tries to take it every `interval`, starts `work` when
/// it has it, checks every `interval` that it still does, and cancels `work` the moment it does not (the server
/// restarted, the session was cut): two replicas never run it at once for longer than one interval. Ends when the
/// calling task is cancelled, releasing the lease. `changed` hears each change (true: held), for logs and status.
public func holdingLease(
    _ lease: LinkLease, interval: Duration = .seconds(1), changed: @escaping @Sendable (Bool) async -> Void = { _ in },
    work: @escaping @Sendable () async -> Void
) async {
    defer { lease.release() }
    while !Task.isCancelled {
        guard
            (try? await offThread(named: "postgres-call") { () throws(PostgresError) in try lease.tryAcquire() })
                == true
        else {
            try? await Task.sleep(for: interval)
            continue
        }
        await changed(true)
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await work() }
            group.addTask {
                while !Task.isCancelled {
                    try? await Task.sleep(for: interval)
                    if Task.isCancelled { return }
                    if !(await offThread(named: "postgres-call") { lease.isHeld }) { return }
                }
            }
            // Whichever ends first (the work, the lease lost, or the caller's cancellation) ends the other.
            await group.next()
            group.cancelAll()
        }
        lease.release()
        await changed(false)
    }
}
