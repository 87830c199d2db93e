import Foundation
import HubSimulator
import SignalRClient
import SignalRProtocol
import Synchronization
import TestSupport
import Testing

/// Hostile frames from the server (the simulator's /_sim/malformed switches): each costs a log line and the
/// right protocol action, never the process; a good message after it in the same frame still arrives.
@Suite(.timeLimit(.minutes(1))) struct HostileInputTests {
    /// Messages the client cannot read as JSON end the link (then it reconnects), as the official clients do;
    /// a bad message does not cost the rest of its frame. Binary frames, so that invalid UTF-8 reaches the hub
    /// protocol as sent (a text frame must be valid UTF-8). `reason`: what the link's end must say, where known.
    @Test(arguments: [("json", "Error reading JSON."), ("deep", nil), ("utf8", nil)] as [(String, String?)])
    func unreadableJSONEndsTheLinkAfterTheRestOfTheFrame(_ kind: String, _ reason: String?) async throws {
        try await withSimulator({ $0.binaryFrames = true }) { base in
            let connection = HubConnection(
                url: hubURL(base),
                options: options { $0.reconnectPolicy = ExponentialRetryPolicy(initial: .milliseconds(50)) },
                logger: quietLogger())
            let notices = Collector<String>()
            await connection.on("SimNotice") { (args: HubArguments) in
                notices.append(try args.decode(0, as: String.self))
            }
            let events = await connection.events()
            try await connection.start()
            try await call(base, "POST", "/_sim/malformed?kind=\(kind)")
            #expect(await notices.wait(for: 1) == ["after the bad one"])
            let lost = await waitForEvent(events) { if case .reconnecting = $0 { true } else { false } }
            guard case .reconnecting(let said) = lost else {
                Issue.record("the link should end after a protocol error")
                return
            }
            if let reason { #expect(said.contains(reason), "\(said)") }
            #expect(await waitForEvent(events) { if case .reconnected = $0 { true } else { false } } != nil)
            await connection.stop()
        }
    }

    /// Readable but unexpected: ignored (with a warning), and the link stays.
    @Test(arguments: ["completion", "headers"])
    func unexpectedButReadableMessagesAreIgnored(_ kind: String) async throws {
        try await withSimulator { base in
            let connection = HubConnection(url: hubURL(base), options: options(), logger: quietLogger())
            let notices = Collector<String>()
            await connection.on("SimNotice") { (args: HubArguments) in
                notices.append(try args.decode(0, as: String.self))
            }
            await connection.on("Headers") { (_: HubArguments) in }
            try await connection.start()
            try await call(base, "POST", "/_sim/malformed?kind=\(kind)")
            #expect(await notices.wait(for: 1) == ["after the bad one"])
            #expect(await connection.state == .connected)
            await connection.stop()
        }
    }

    /// A routed target whose arguments read in one pass, in a message that then turns out not to be in the
    /// common form (headers after the arguments): the full decoder takes it, and it arrives once, not twice.
    @Test func aRoutedMessageThatLeavesTheCommonFormAfterItsArgumentsArrivesOnce() async throws {
        try await withSimulator { base in
            let connection = HubConnection(url: hubURL(base), options: options(), logger: quietLogger())
            let notices = Collector<String>()
            await connection.on("SimNotice") { (args: HubArguments) in
                notices.append(try args.decode(0, as: String.self))
            }
            let read = Atomic<Int>(0)
            let routed = HubEventBuffer<String>(capacity: 10)
            await connection.on(
                HubEventDecoder(
                    targets: ["Headers"],
                    read: { _, reader in
                        read.add(1, ordering: .relaxed)
                        return reader.skipValue() ? "read in one pass" : nil
                    },
                    decode: { _, _ in "decoded" }, onError: { _, _ in }),
                into: routed)
            try await connection.start()
            try await call(base, "POST", "/_sim/malformed?kind=headers")
            #expect(await notices.wait(for: 1) == ["after the bad one"])
            #expect(read.load(ordering: .relaxed) == 1, "the one-pass reader did read its arguments")
            #expect(await routed.next(limit: 10) == ["decoded"], "once, from the full decoder")
            #expect(routed.count == 0)
            await connection.stop()
        }
    }

    @Test func tenThousandMessagesInOneFrameAllArriveInOrder() async throws {
        try await withSimulator { base in
            let connection = HubConnection(url: hubURL(base), options: options(), logger: quietLogger())
            let flood = Mutex<[Int]>([])
            let notices = Collector<String>()
            await connection.on("SimFlood") { (args: HubArguments) in
                let n = try args.decode(0, as: Int.self)
                flood.withLock { $0.append(n) }
            }
            await connection.on("SimNotice") { (args: HubArguments) in
                notices.append(try args.decode(0, as: String.self))
            }
            try await connection.start()
            try await call(base, "POST", "/_sim/malformed?kind=flood")
            #expect(await notices.wait(for: 1) == ["after the bad one"])
            #expect(flood.withLock { $0 } == Array(0..<10_000), "every one, in order, before the message after them")
            #expect(await connection.state == .connected)
            await connection.stop()
        }
    }
}
