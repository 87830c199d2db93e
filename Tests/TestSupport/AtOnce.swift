import Foundation
import Synchronization

/// Runs each body on a thread of its own, released together, and returns their results in order.
public func atOnce<T: Sendable>(_ bodies: [@Sendable () throws -> T]) throws -> [T] {
    let results = Mutex<[Int: Result<T, any Error>]>([:])
    let start = DispatchSemaphore(value: 0)
    let done = DispatchGroup()
    for (n, body) in bodies.enumerated() {
        done.enter()
        Thread {
            start.wait()
            let result = Result { try body() }
            results.withLock { $0[n] = result }
            done.leave()
        }.start()
    }
    for _ in bodies { start.signal() }
    done.wait()
    return try results.withLock { r in try bodies.indices.map { try r[$0]!.get() } }
}
