import Foundation
import Hummingbird
import Synchronization

/// Load for the benchmarks (`make bench`): a stream of real transactions, encoded before the clock starts and
/// then pushed as fast as the sockets take them; or paced at a rate, with each send time recorded.
final class BlastState: Sendable {
    struct State {
        /// Encoded frames, each holding `batch` hub messages (TransactionCreated and BalanceUpdated per transaction).
        var frames: [[UInt8]] = []
        var events = 0
        /// Transaction id -> when it was broadcast (seconds since 1970), for latency.
        var sentAt: [String: Double] = [:]
    }

    let state = Mutex(State())
}

extension HubSimulator {
    /// `/_sim/blast/...`, `/_sim/paced` and `/_sim/sent-times`: the benchmark's loads.
    func blastRoutes() -> RouteCollection<BasicRequestContext> {
        let sim = RouteCollection(context: BasicRequestContext.self)
        // Records `count` transactions in the family (the REST API lists them) and encodes their two hub events
        // each into frames of `batch` messages (`protocol=messagepack`: MessagePack's). Nothing is sent: `go` sends. Without `go`, they are the
        // transactions a relay that was down has missed.
        sim.post("blast/prepare") { request, _ in
            let q = request.uri.queryParameters
            let count = Int(q["count"].map(String.init) ?? "") ?? 1000
            let batch = max(1, Int(q["batch"].map(String.init) ?? "") ?? 20)
            // The protocol the clients of this blast speak (the frames go out as they are).
            let messagePack = q["protocol"] == "messagepack"
            var frames: [[UInt8]] = []
            var frame: [UInt8] = []
            var inFrame = 0
            for _ in 0..<count {
                let a = await self.family.randomActivity()
                guard
                    let (t, _) = try? await self.family.addTransaction(
                        childId: a.childId, amount: a.amount, type: a.type, description: a.description, by: "Simulator",
                        idempotencyKey: nil)
                else { continue }
                for message in Self.events(t) {
                    frame += messagePack ? SimMessagePackProtocol.encode(message) : SimJSONHubProtocol.encode(message)
                    inFrame += 1
                    if inFrame == batch {
                        frames.append(frame)
                        frame = []
                        inFrame = 0
                    }
                }
            }
            if !frame.isEmpty { frames.append(frame) }
            let events = count * 2
            self.blast.state.withLock {
                $0.frames = frames
                $0.events = events
            }
            return self.json(
                200,
                [
                    "transactions": .number(Decimal(count)), "events": .number(Decimal(events)),
                    "frames": .number(Decimal(frames.count)),
                ])
        }
        // Hands every prepared frame to every connected socket's writer at once; the sockets drain at their pace.
        sim.post("blast/go") { _, _ in
            let (frames, events) = self.blast.state.withLock { ($0.frames, $0.events) }
            for f in frames { await self.hub.broadcast(raw: f) }
            return self.json(200, ["frames": .number(Decimal(frames.count)), "events": .number(Decimal(events))])
        }
        // `count` transactions at `rate` per second, each broadcast as it is created; send times kept for latency.
        sim.post("paced") { request, _ in
            let q = request.uri.queryParameters
            let count = Int(q["count"].map(String.init) ?? "") ?? 100
            let rate = max(1, Double(q["rate"].map(String.init) ?? "") ?? 100)
            let interval = Duration.seconds(1 / rate)
            var next = ContinuousClock.now
            for _ in 0..<count {
                try? await Task.sleep(until: next)
                next += interval
                let a = await self.family.randomActivity()
                guard
                    let (t, _) = try? await self.family.addTransaction(
                        childId: a.childId, amount: a.amount, type: a.type, description: a.description, by: "Simulator",
                        idempotencyKey: nil)
                else { continue }
                // The send time is taken before the broadcast: a fast client may store the event before
                // broadcast returns here.
                let sent = Date().timeIntervalSince1970
                self.blast.state.withLock { $0.sentAt[t.id.uuidString.lowercased()] = sent }
                for message in Self.events(t) {
                    if case .invocation(let inv) = message { await self.hub.broadcast(inv.target, inv.arguments) }
                }
            }
            return self.json(200, ["sent": .number(Decimal(count))])
        }
        sim.get("sent-times") { _, _ in
            let times = self.blast.state.withLock { $0.sentAt }
            return self.json(200, .object(times.map { ($0.key, .number(Decimal($0.value))) }))
        }
        return sim
    }

    static func events(_ t: SimTransaction) -> [SimMessage] {
        [
            .event("TransactionCreated", [SimJSON.value(t)]),
            .event("BalanceUpdated", [.string(t.childId.uuidString), .number(t.balanceAfter)]),
        ]
    }
}
