// Why ThreadSanitizer's reports on this project are read by hand (RELIABILITY.md, "Sanitizers"):
//   swiftc -sanitize=thread Tests/Sanitizers/mutex-under-tsan.swift -o /tmp/m && /tmp/m
// Two threads add to a counter only inside Synchronization.Mutex.withLock. The total is exact (200000), yet
// TSan on Linux reports "Swift access race": it does not see the Mutex's futex as synchronisation.
import Foundation
import Synchronization

final class Counter: Sendable { let value = Mutex(0) }
let counter = Counter()
let threads = (0..<2).map { _ in Thread { for _ in 0..<100_000 { counter.value.withLock { $0 += 1 } } } }
threads.forEach { $0.start() }
while counter.value.withLock({ $0 }) < 200_000 { usleep(1000) }
print("total", counter.value.withLock { $0 })
