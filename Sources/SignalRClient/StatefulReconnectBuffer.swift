import SignalRProtocol

/// Stateful reconnect bookkeeping for one logical connection (no I/O: the connection acts on what it says).
///
/// Sent messages of types 1-5 are numbered from 1 and kept until the peer acknowledges them; received ones
/// are numbered the same way so that a replay after a re-attach can be told from new messages.
struct StatefulReconnectBuffer {
    let capacity: Int
    private(set) var nextSendId: Int64 = 1
    private var unacked: [(id: Int64, bytes: [UInt8])] = []
    private var unackedHead = 0
    private(set) var bufferedBytes = 0
    /// The highest incoming sequence id processed.
    private(set) var lastReceived: Int64 = 0
    private var nextIncomingId: Int64 = 1
    /// After a re-attach, incoming messages are ignored until the peer's Sequence says where it resumes.
    private(set) var awaitingPeerSequence = false

    init(capacity: Int) { self.capacity = capacity }

    var isFull: Bool { bufferedBytes >= capacity }

    /// A tracked message is being sent: keep it until acknowledged.
    mutating func sent(_ bytes: [UInt8]) {
        unacked.append((nextSendId, bytes))
        bufferedBytes += bytes.count
        nextSendId += 1
    }

    /// The peer has everything up to `id`.
    mutating func acknowledged(upTo id: Int64) {
        while unackedHead < unacked.count, unacked[unackedHead].id <= id {
            bufferedBytes -= unacked[unackedHead].bytes.count
            unackedHead += 1
        }
        if unackedHead > 64, unackedHead * 2 > unacked.count {
            unacked.removeFirst(unackedHead)
            unackedHead = 0
        }
    }

    enum Incoming { case process, duplicate, ignoredUntilSequence }

    /// A tracked message arrived: process it, or drop it as already seen.
    mutating func received() -> Incoming {
        if awaitingPeerSequence { return .ignoredUntilSequence }
        let id = nextIncomingId
        nextIncomingId += 1
        guard id > lastReceived else { return .duplicate }
        lastReceived = id
        return .process
    }

    /// The peer's Sequence message: its next tracked message carries `id`.
    mutating func peerSequence(_ id: Int64) throws(HubConnectionError) {
        guard id <= lastReceived + 1 else {
            throw HubConnectionError(.protocolError, "Sequence ID greater than amount of messages we've received.")
        }
        nextIncomingId = id
        awaitingPeerSequence = false
    }

    /// What to send on a re-attach: Sequence(first unacknowledged id), then those messages again.
    mutating func beginReattach() -> (sequenceId: Int64, replay: [[UInt8]]) {
        awaitingPeerSequence = true
        let pending = unacked[unackedHead...]
        return (pending.first?.id ?? nextSendId, pending.map(\.bytes))
    }
}
