import PostgresTransport

/// A replica's worker on a `ClaimQueue`: claims due jobs, hands each to `handle`, records what came of it; with
/// nothing to claim, waits for a `NOTIFY` on the queue's channel or for the next job or expired claim to come due,
/// whichever is first. A worker that dies (its process killed, its database lost) leaves its claims to expire;
/// another worker then takes them with the same keys. Ends when its task is cancelled (within `maxWait`): the job in
/// hand is finished and recorded, the rest of its batch given back.
public struct ClaimWorker: Sendable {
    public enum Outcome: Sendable, Equatable {
        case done
        /// A failure a later try may mend (a 5xx, a timeout).
        case retry(after: Duration, error: String)
        /// Not to be tried again (a 4xx).
        case giveUp(String)
    }

    public let queue: ClaimQueue
    /// A session of its own, LISTENing on the queue's channel (it does nothing else).
    public let listener: PostgresConnection
    public let replica: String
    public var batch = 10
    public var claimFor: Duration = .seconds(60)
    /// The longest wait between looks (and so the longest a cancelled worker takes to end).
    public var maxWait: Duration = .seconds(1)

    public init(queue: ClaimQueue, listener: PostgresConnection, replica: String) throws(PostgresError) {
        self.queue = queue
        self.listener = listener
        self.replica = replica
        try listener.listen(queue.table)
    }

    /// Works until cancelled. Errors from the database end it (the caller decides when to try a new session).
    public func run(_ handle: @escaping @Sendable (ClaimQueue.Job) async -> Outcome) async throws(PostgresError) {
        let (queue, listener, replica, batch, claimFor, maxWait) = (queue, listener, replica, batch, claimFor, maxWait)
        while !Task.isCancelled {
            let jobs = try await offThread { () throws(PostgresError) in
                try queue.claim(batch, by: replica, for: claimFor)
            }
            var finished: [String] = []
            for (n, job) in jobs.enumerated() {
                // Stopping: the job in hand was finished; the rest go back now, for this or another replica, rather
                // than wait out their claims.
                if Task.isCancelled {
                    for rest in jobs[n...] {
                        _ = try await offThread { () throws(PostgresError) in
                            try queue.retry(rest.key, by: replica, after: .zero, error: "given back at a stop")
                        }
                    }
                    break
                }
                switch await handle(job) {
                case .done:
                    finished.append(job.key)
                case .retry(let after, let error):
                    _ = try await offThread { () throws(PostgresError) in
                        try queue.retry(job.key, by: replica, after: after, error: error)
                    }
                case .giveUp(let error):
                    _ = try await offThread { () throws(PostgresError) in
                        try queue.giveUp(job.key, by: replica, error: error)
                    }
                }
            }
            if !finished.isEmpty {
                let done = finished
                _ = try await offThread { () throws(PostgresError) in try queue.complete(done, by: replica) }
            }
            guard jobs.isEmpty else { continue }
            let wait =
                try await offThread { () throws(PostgresError) in try queue.nextDue() }.map { min($0, maxWait) }
                ?? maxWait
            _ = try await offThread { () throws(PostgresError) in try listener.notifications(timeout: wait) }
        }
    }
}
