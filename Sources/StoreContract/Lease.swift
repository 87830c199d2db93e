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

/// A lease a relay can wait for, and hold, with no timer: a standby sleeps until the lease is free, its holder until
/// it is lost. The hub link's lease on a shared database (`LinkLease`; `holdingLease` runs the link on it), and the
/// file's (`FileLease`; the daemon's standby waits for it).
public protocol WatchedLease: Lease {
    /// Blocks until this relay holds the lease (true), or until `wake` is signalled (false). Throws when the lease's
    /// keeper (the server) cannot be reached.
    func acquire(until wake: PollWake) throws -> Bool
    /// Blocks while the lease is held: returns once it is lost (its session ended), or when `wake` is signalled.
    func watch(until wake: PollWake)
}

/// Runs `work` only while this relay holds `lease`: waits for it, starts `work` when it has it, and cancels `work`
/// the moment it is lost (the holder's session ended: the next holder may already have it). Neither wait wakes on a
/// timer; `interval` only spaces the tries while the lease's keeper cannot be reached. Ends when the calling task is
/// cancelled (releasing the lease), or with the error `work` throws. `changed` hears each change (true: held), for
/// logs and status.
public func holdingLease(
    _ lease: any WatchedLease, interval: Duration = .seconds(1),
    changed: @escaping @Sendable (Bool) async -> Void = { _ in }, work: @escaping @Sendable () async throws -> Void
) async throws {
    defer { lease.release() }
    while !Task.isCancelled {
        guard (try? await waiting(named: "lease-wait", { wake in try lease.acquire(until: wake) })) == true else {
            if !Task.isCancelled { try? await Task.sleep(for: interval) }
            continue
        }
        // Granted just as the stop cancelled the wait: let go rather than start the work.
        if Task.isCancelled { break }
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
                await waiting(named: "lease-watch") { wake in lease.watch(until: wake) }
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

/// Runs a call that blocks until `wake` is signalled (or it is done) on a thread of its own; the task's cancellation
/// signals the wake.
private func waiting<T: Sendable, E: Error>(
    named name: String, _ body: @escaping @Sendable (PollWake) throws(E) -> T
) async throws(E) -> T {
    let wake = PollWake()
    let result: Result<T, E> = await withTaskCancellationHandler {
        await offThread(named: name) { () -> Result<T, E> in
            do throws(E) { return .success(try body(wake)) } catch { return .failure(error) }
        }
    } onCancel: {
        wake.signal()
    }
    return try result.get()
}
