// Throughput client for `make bench`: our SignalR client alone. Each TransactionCreated and BalanceUpdated is
// decoded into the domain's HubEvent by a registered handler, then counted; nothing is stored.
//
//   allowance-bench-client BASE_URL TOKEN COUNT
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

final class Counter: Sendable {
    private let state = Mutex<(n: Int, first: ContinuousClock.Instant?, failed: Int)>((0, nil, 0))
    let target: Int
    init(target: Int) { self.target = target }

    func count(decoded: Bool) {
        let done = state.withLock { s -> Duration? in
            if s.first == nil { s.first = .now }
            s.n += 1
            if !decoded { s.failed += 1 }
            return s.n == target ? ContinuousClock.now - s.first! : nil
        }
        if let done {
            let seconds = Double(done.components.seconds) + Double(done.components.attoseconds) / 1e18
            say(#"{"events":\#(target),"seconds":\#(seconds),"undecodable":\#(state.withLock { $0.failed })}"#)
        }
    }
}

let counter = Counter(target: target)
var options = HubConnectionOptions()
options.accessTokenProvider = { token }
let connection = HubConnection(url: base.appending(path: "hubs/family"), options: options, logger: logger)
for name in HubEvent.targets {
    await connection.on(name) { (args: HubArguments) in
        let decoded = (try? HubEvent(target: name, arguments: args)) != nil
        counter.count(decoded: decoded)
    }
}
do {
    try await connection.start()
} catch {
    FileHandle.standardError.write(Data("allowance-bench-client: \(error)\n".utf8))
    exit(1)
}
say("connected")
while true { try await Task.sleep(for: .seconds(3600)) }
