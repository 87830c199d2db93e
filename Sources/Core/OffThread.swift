/// Runs a blocking call (a round trip to a database, a child process to its end, a connect that may wait for its
/// timeout) on a thread of its own, named `name` (see `ThreadName`), and waits for it without holding a thread. The
/// cooperative pool has one thread per core, two on a small server: a blocking call there stalls every task and timer
/// of the process for as long as it blocks.
public func offThread<T: Sendable, E: Error>(
    named name: String, _ body: @escaping @Sendable () throws(E) -> T
) async throws(E) -> T {
    let result: Result<T, E> = await withCheckedContinuation { continuation in
        OwnThread.startDetached(named: name) {
            do throws(E) {
                continuation.resume(returning: .success(try body()))
            } catch {
                continuation.resume(returning: .failure(error))
            }
        }
    }
    return try result.get()
}
