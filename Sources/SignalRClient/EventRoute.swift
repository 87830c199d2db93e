import SignalRProtocol

/// A route from invocations to one event buffer (type-erased, for the connection's table).
protocol EventRoute: AnyObject {
    /// Reads the arguments in one pass into a candidate event; false when not in the common form.
    func read(_ target: String, _ reader: inout JSONReader) -> Bool
    /// The same from MessagePack.
    func read(_ target: String, _ reader: inout MessagePackReader) -> Bool
    /// Keeps the candidate (its whole message was valid and is to be processed); one not kept is forgotten.
    func commit()
    /// Decodes from the parsed arguments; a refusal goes to the decoder's `onError`.
    func decode(_ target: String, _ arguments: HubArguments)
    /// Events kept since the last hand-over.
    var hasStaged: Bool { get }
    /// How long to hold what is staged for the next frame (nil: hand it over now): its last event is followed.
    var followerWait: Duration? { get }
    /// Appends the events kept since the last hand-over to the buffer, in one go, on the caller's actor.
    func handOver(isolation: isolated (any Actor)?) async
}

final class Route<Event: Sendable>: EventRoute {
    let decoder: HubEventDecoder<Event>
    let buffer: HubEventBuffer<Event>
    /// Events kept for the buffer, and after them at most one candidate (`hasCandidate`), read but not yet kept:
    /// its message may still prove not to be in the common form, or be a replay. The candidate sits in `staged`
    /// rather than in an `Event?`, and the decoder's `stage` puts it there: this class is generic, and each use of an
    /// `Event?` or `[Event]` here looks up its metadata at run time. A candidate not kept is forgotten by whatever
    /// comes next.
    var staged: [Event] = []
    var hasCandidate = false

    func forgetCandidate() {
        if hasCandidate { staged.removeLast() }
        hasCandidate = false
    }

    init(decoder: HubEventDecoder<Event>, buffer: HubEventBuffer<Event>) {
        self.decoder = decoder
        self.buffer = buffer
    }

    func read(_ target: String, _ reader: inout JSONReader) -> Bool {
        forgetCandidate()
        hasCandidate = decoder.stage(target, &reader, &staged)
        return hasCandidate
    }

    func read(_ target: String, _ reader: inout MessagePackReader) -> Bool {
        forgetCandidate()
        hasCandidate = decoder.stageMessagePack(target, &reader, &staged)
        return hasCandidate
    }

    func commit() {
        hasCandidate = false
    }

    func decode(_ target: String, _ arguments: HubArguments) {
        forgetCandidate()
        do {
            staged.append(try decoder.decode(target, arguments))
        } catch {
            decoder.onError(target, error)
        }
    }

    var hasStaged: Bool { staged.count > (hasCandidate ? 1 : 0) }

    var followerWait: Duration? {
        let kept = staged.count - (hasCandidate ? 1 : 0)
        guard kept > 0, decoder.followerWait > .zero, decoder.isFollowed(staged[kept - 1]) else { return nil }
        return decoder.followerWait
    }

    func handOver(isolation: isolated (any Actor)?) async {
        forgetCandidate()
        guard !staged.isEmpty else { return }
        let batch = staged
        staged = []
        await buffer.append(contentsOf: batch, isolation: isolation)
    }
}

/// The connection's routes by target, matched without regard to case (as the official clients match), from a
/// message's bytes without a String made for them. A handful of targets: a linear scan.
struct RouteTable {
    private struct Entry {
        /// As registered: what the route's `read` and `decode` are given, whatever case the server wrote.
        let target: String
        /// `target` lowercased, as UTF-8.
        let key: [UInt8]
        let route: any EventRoute
    }
    private var entries: [Entry] = []
    /// Each route once (a route serves several targets).
    private(set) var all: [any EventRoute] = []

    var isEmpty: Bool { entries.isEmpty }

    mutating func add(_ route: any EventRoute, for targets: [String]) {
        for target in targets {
            remove(target)
            entries.append(Entry(target: target, key: Array(target.lowercased().utf8), route: route))
        }
        all.append(route)
    }

    mutating func remove(_ target: String) {
        let key = Array(target.lowercased().utf8)
        entries.removeAll { $0.key == key }
        all.removeAll { route in !entries.contains { $0.route === route } }
    }

    /// The route of `target` (the tree path's lookup) and the target as registered.
    func find(_ target: String) -> (target: String, route: any EventRoute)? {
        var name = target.lowercased()
        return name.withUTF8 { find(UnsafeRawBufferPointer($0)) }
    }

    /// The same from a target's UTF-8 bytes as the message has them: ASCII letters match in either case; any other
    /// spelling of a registered target (other UTF-8 case pairs) is found by `find(_: String)` on the tree path.
    func find(_ target: UnsafeRawBufferPointer) -> (target: String, route: any EventRoute)? {
        let bytes = target.assumingMemoryBound(to: UInt8.self)
        for entry in entries where entry.key.withUnsafeBufferPointer({ bytes.spells(lowercased: $0) }) {
            return (entry.target, entry.route)
        }
        return nil
    }
}
