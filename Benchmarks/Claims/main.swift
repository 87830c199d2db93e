// The shared queue's cost for `Benchmarks/claims.py`: CLAIMERS sessions (as that many relay replicas would have)
// claim JOBS jobs from one PostgreSQL table in batches of BATCH and record each batch's outcomes in one commit,
// until none is left. Measures the queue alone (no sends): claim and completion round trips and commits.
//
//   allowance-bench-claims URL CLAIMERS JOBS BATCH      (the password in BENCH_PG_PASSWORD)
// Prints {"claimers":N,"jobs":N,"seconds":S,"perSecond":R,"repeats":N,"cpuSeconds":C}.
import Foundation
import PostgresTransport
import SharedStore
import Synchronization

let arguments = CommandLine.arguments
guard arguments.count == 5, let claimers = Int(arguments[2]), let jobs = Int(arguments[3]), let batch = Int(arguments[4]) else {
    FileHandle.standardError.write(Data("usage: allowance-bench-claims URL CLAIMERS JOBS BATCH\n".utf8))
    exit(2)
}
let password = ProcessInfo.processInfo.environment["BENCH_PG_PASSWORD"]
do {
    let location = try PostgresLocation(arguments[1])
    let setup = try PostgresConnection(location, password: password)
    try setup.query("DROP TABLE IF EXISTS bench_jobs")
    try setup.query(ClaimQueue.creating(table: "bench_jobs", extraColumns: "sink text NOT NULL, body text NOT NULL"))
    // Rows like a delivery's: a key, a sink and a body of a webhook's size.
    try setup.query(
        "INSERT INTO bench_jobs (job_key, sink, body) SELECT 'msg_' || i, 'sink' || (i % 5), repeat('x', 600) FROM generate_series(1, $1) AS i",
        [String(jobs)])
    try setup.query("VACUUM ANALYZE bench_jobs")

    final class Tally: Sendable { let done = Mutex<[String: Int]>([:]) }
    let tally = Tally()
    // A session each, as each replica has its own; a thread each, as libpq's calls block.
    let queues = try (0..<claimers).map { _ in ClaimQueue(table: "bench_jobs", db: try PostgresConnection(location, password: password)) }
    let finished = Atomic<Int>(0)
    let start = ContinuousClock.now
    for (n, queue) in queues.enumerated() {
        Thread {
            while let claimed = try? queue.claim(batch, by: "replica-\(n)", for: .seconds(60)), !claimed.isEmpty {
                tally.done.withLock { done in for job in claimed { done[job.key, default: 0] += 1 } }
                _ = try? queue.complete(claimed.map(\.key), by: "replica-\(n)")
            }
            finished.add(1, ordering: .relaxed)
        }.start()
    }
    while finished.load(ordering: .relaxed) < claimers { Thread.sleep(forTimeInterval: 0.005) }
    let seconds = (ContinuousClock.now - start) / .seconds(1)
    var usage = rusage()
    getrusage(Int32(RUSAGE_SELF.rawValue), &usage)
    let cpu = Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6
    let done = tally.done.withLock { $0 }
    let remaining = try setup.query("SELECT count(*) FROM bench_jobs WHERE state <> 'done'").scalar ?? "?"
    guard done.count == jobs, remaining == "0" else {
        FileHandle.standardError.write(Data("only \(done.count) of \(jobs) jobs were done (\(remaining) left)\n".utf8))
        exit(1)
    }
    print(
        "{\"claimers\":\(claimers),\"jobs\":\(jobs),\"seconds\":\(seconds),\"perSecond\":\(Double(jobs) / seconds),"
            + "\"repeats\":\(done.values.filter { $0 > 1 }.count),\"cpuSeconds\":\(cpu)}")
} catch {
    FileHandle.standardError.write(Data("allowance-bench-claims: \(error)\n".utf8))
    exit(1)
}
