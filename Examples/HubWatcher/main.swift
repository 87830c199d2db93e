// A minimal SignalRClient program: connect with a token, print every invocation of the targets named, reconnect
// on loss, until Ctrl-C. See Sources/SignalRClient/SignalRClient.docc.
//
//   swift run signalr-hub-watcher URL TOKEN TARGET...
//   e.g. swift run signalr-hub-watcher http://127.0.0.1:5000/hubs/family demo TransactionCreated BalanceUpdated
//
// HUB_PROTOCOL=messagepack speaks MessagePack; HUB_TRANSPORTS=ServerSentEvents,LongPolling limits the transports.
import Foundation
import SignalRClient

/// A line at once (print's buffer would hold lines back in a pipe).
func say(_ line: String) { try? FileHandle.standardOutput.write(contentsOf: Data((line + "\n").utf8)) }

let arguments = CommandLine.arguments.dropFirst()
guard arguments.count >= 3, let url = URL(string: arguments.first!) else {
    FileHandle.standardError.write(Data("usage: signalr-hub-watcher URL TOKEN TARGET...\n".utf8))
    exit(64)
}
let token = arguments.dropFirst().first!
let targets = arguments.dropFirst(2)

var options = HubConnectionOptions()
options.accessTokenProvider = { token }
options.reconnectPolicy = ExponentialRetryPolicy()
let environment = ProcessInfo.processInfo.environment
if let name = environment["HUB_PROTOCOL"] {
    guard let kind = HubProtocolKind(rawValue: name) else {
        FileHandle.standardError.write(Data("HUB_PROTOCOL must be json or messagepack\n".utf8))
        exit(64)
    }
    options.hubProtocol = kind
}
if let names = environment["HUB_TRANSPORTS"] {
    options.transports = names.split(separator: ",").compactMap { TransportKind(rawValue: String($0)) }
}
let connection = HubConnection(url: url, options: options)
for target in targets {
    await connection.on(target) { arguments in
        let values = (0..<arguments.count).compactMap { try? arguments.value(at: $0).serialized }
        say("\(target)(\(values.joined(separator: ", ")))")
    }
}
let watcher = Task {
    for await event in await connection.events() {
        say("link: \(event)\(await connection.transport.map { " over \($0.rawValue)" } ?? "")")
    }
}
do {
    try await connection.start()
} catch {
    FileHandle.standardError.write(Data("could not connect: \(error.message)\n".utf8))
    exit(error.kind == .unauthorized ? 77 : 1)
}
await watcher.value
