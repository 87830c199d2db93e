// Throughput client for `make bench`: our SignalR client alone. TransactionCreated and BalanceUpdated are decoded
// into the domain's HubEvent as the relay does it (one pass from the frame's bytes into a bounded buffer), then a
// consumer on the connection's thread counts them; nothing is stored.
//
//   allowance-bench-client BASE_URL TOKEN COUNT
// BENCH_PROTOCOL=messagepack speaks MessagePack; BENCH_TRANSPORT=LongPolling (or ServerSentEvents) uses that transport.
// Prints "connected", then {"events":N,"seconds":S} (first to last event), then stays connected until killed.
import AllowanceAPI
import Foundation
import Logging
import SignalRClient
import Synchronization

let arguments = CommandLine.arguments
guard arguments.count == 4, let base = URL(string: arguments[1]), let target = Int(arguments[3]) else {
    FileHandle.standardError.write(Data("usage: allowance-bench-client BASE_URL TOKEN COUNT\n".utf8))
    exit(2)
}
let token = arguments[2]
var logger = Logger(label: "bench")
logger.logLevel = .error

/// One line to stdout, at once (the harness waits for it).
func say(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

let failed = Atomic<Int>(0)
var options = HubConnectionOptions()
options.accessTokenProvider = { token }
let environment = ProcessInfo.processInfo.environment
if let name = environment["BENCH_PROTOCOL"], let kind = HubProtocolKind(rawValue: name) { options.hubProtocol = kind }
if let name = environment["BENCH_TRANSPORT"], let kind = TransportKind(rawValue: name) { options.transports = [kind] }
let connection = HubConnection(url: base.appending(path: "hubs/family"), options: options, logger: logger)
let events = HubEventBuffer<HubEvent>(capacity: 10_000)
await connection.on(HubEvent.decoder { _ in failed.add(1, ordering: .relaxed) }, into: events)
// The counter does next to nothing per event: it runs on the connection's own thread, as pysignalr's callbacks run on
// its asyncio loop, and a frame wakes that one thread (a consumer on the global pool costs a second wake per hand-over).
let counter = Task(executorPreference: connection.taskExecutor) {
    var n = 0
    var first: ContinuousClock.Instant?
    while n + failed.load(ordering: .relaxed) < target, let batch = await events.next(limit: 10_000) {
        if first == nil { first = .now }
        n += batch.count
    }
    let took = ContinuousClock.now - first!
    let seconds = Double(took.components.seconds) + Double(took.components.attoseconds) / 1e18
    say(#"{"events":\#(target),"seconds":\#(seconds),"undecodable":\#(failed.load(ordering: .relaxed))}"#)
}
do {
    try await connection.start()
} catch {
    FileHandle.standardError.write(Data("allowance-bench-client: \(error)\n".utf8))
    exit(1)
}
say("connected")
while true { try await Task.sleep(for: .seconds(3600)) }
