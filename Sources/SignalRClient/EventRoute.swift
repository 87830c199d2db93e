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
