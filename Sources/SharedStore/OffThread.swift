import Core
import Foundation

/// Runs a blocking call (a round trip to the database, a connect that may wait for its timeout) on a thread of its
/// own, so that the cooperative pool's few threads are not held by the network.
func offThread<T: Sendable, E: Error>(_ body: @escaping @Sendable () throws(E) -> T) async throws(E) -> T {
    let result: Result<T, E> = await withCheckedContinuation { continuation in
        let thread = Thread {
            ThreadName.set("postgres-call")
            do throws(E) {
                continuation.resume(returning: .success(try body()))
            } catch {
                continuation.resume(returning: .failure(error))
            }
        }
        thread.start()
    }
    return try result.get()
}

func offThread<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
    await withCheckedContinuation { continuation in
        Thread {
            ThreadName.set("postgres-call")
            continuation.resume(returning: body())
        }.start()
    }
}
