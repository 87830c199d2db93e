import Core

/// The right to hold the hub link and write what it brings: one relay at a time per store. On a shared database a
/// PostgreSQL advisory lock (`LinkLease`), held by the link only, so standbys still do their share of the deliveries;
/// on a SQLite file a lock on the file (`FileLease`), held by the whole relay, since a file's ledger has no claims.
/// Both are let go by the system when their holder dies, so a lease needs no expiry of its own.
public protocol Lease: Sendable {
    /// One try: true when this relay holds the lease now (it may have held it already).
    func tryAcquire() throws -> Bool
    /// Whether the lease is still ours (false once the server restarted or the session was cut).
    var isHeld: Bool { get }
    /// Lets go at once; safe to call when not held.
    func release()
}

/// Runs `work` only while this relay holds `lease`: tries to take it every `interval`, starts `work` when it has
/// it, checks every `interval` that it still does, and cancels `work` the moment it does not: two relays never run it
/// at once for longer than one interval. Ends when the calling task is cancelled (releasing the lease), or with the
/// error `work` throws. `changed` hears each change (true: held), for logs and status.
public func holdingLease(
    _ lease: any Lease, interval: Duration = .seconds(1), changed: @escaping @Sendable (Bool) async -> Void = { _ in },
    work: @escaping @Sendable () async throws -> Void
) async throws {
    defer { lease.release() }
    while !Task.isCancelled {
        guard (try? await offThread(named: "lease-call") { try lease.tryAcquire() }) == true else {
            try? await Task.sleep(for: interval)
            continue
        }
        await changed(true)
        defer { lease.release() }
        let ended: Result<Void, any Error> = await withTaskGroup(of: Result<Void, any Error>?.self) { group in
            group.addTask {
                do {
                    try await work()
                    return .success(())
                } catch {
                    return .failure(error)
                }
            }
            group.addTask {
                while !Task.isCancelled {
                    try? await Task.sleep(for: interval)
                    if Task.isCancelled { return nil }
                    if !(await offThread(named: "lease-call") { lease.isHeld }) { return nil }
                }
                return nil
            }
            // Whichever ends first (the work, the lease lost, or the caller's cancellation) ends the other.
            let first = await group.next() ?? nil
            group.cancelAll()
            return first ?? .success(())
        }
        lease.release()
        await changed(false)
        try ended.get()
    }
}
