import Foundation
import Logging
import Synchronization

/// One client's logical hub connection. With stateful reconnect it outlives its socket: messages sent while
/// no socket is attached are kept, and a new socket with the same id re-attaches and gets them replayed.
final class HubClient: Sendable {
    let connectionId: String
    let token: String
    let stateful: Bool
    private let state = Mutex(State())

    struct State {
        var sink: AsyncStream<[UInt8]>.Continuation?
        /// Nothing but the handshake answer goes to a socket before its handshake is done.
        var handshaken = false
        var socketGeneration = 0
        var pingsReceived = 0
        var messagesReceived = 0
        var lastReceive = ContinuousClock.now
        var lastSend = ContinuousClock.now
        // Stateful reconnect.
        var nextSendId: Int64 = 1
        var unacked: [(id: Int64, bytes: [UInt8])] = []
        var lastReceived: Int64 = 0
        var nextIncomingId: Int64 = 1
        var awaitingSequence = false
        var forgotten = false
        /// Messages sent again after a re-attach (the ones the client had not acknowledged).
        var replayed = 0
        /// The connection's hub protocol, from its handshake.
        var messagePack = false
    }

    init(connectionId: String, token: String, stateful: Bool) {
        self.connectionId = connectionId
        self.token = token
        self.stateful = stateful
    }

    /// Gives the client a socket; returns its generation, which `detach` must present.
    func attach(_ sink: AsyncStream<[UInt8]>.Continuation) -> Int {
        state.withLock { s in
            s.sink = sink
            s.handshaken = false
            s.socketGeneration += 1
            s.lastReceive = .now
            return s.socketGeneration
        }
    }

    /// The socket of `generation` ended. Returns true when no newer socket took over.
    func detach(generation: Int) -> Bool {
        state.withLock { s in
            guard s.socketGeneration == generation else { return false }
            s.sink = nil
            return true
        }
    }

    var isAttached: Bool { state.withLock { $0.sink != nil } }
    var isForgotten: Bool { state.withLock { $0.forgotten } }

    /// Ends the current socket abruptly; with `forget`, the connection cannot be re-attached either.
    /// With `generation`, only if that socket is still the current one (a re-attach may have replaced it).
    func endSocket(forget: Bool = false, generation: Int? = nil) {
        let sink = state.withLock { s -> AsyncStream<[UInt8]>.Continuation? in
            if let generation, generation != s.socketGeneration { return nil }
            if forget { s.forgotten = true }
            defer { s.sink = nil }
            return s.sink
        }
        sink?.finish()
    }

    /// Whether the connection speaks MessagePack (set by its handshake).
    var speaksMessagePack: Bool {
        get { state.withLock { $0.messagePack } }
        set { state.withLock { $0.messagePack = newValue } }
    }

    func send(_ message: SimMessage) {
        state.withLock { s in
            let bytes = s.messagePack ? SimMessagePackProtocol.encode(message) : SimJSONHubProtocol.encode(message)
            if stateful && message.isSequenced {
                s.unacked.append((s.nextSendId, bytes))
                s.nextSendId += 1
            }
            s.lastSend = .now
            if s.handshaken { s.sink?.yield(bytes) }
        }
    }

    /// Bytes outside the hub protocol's bookkeeping (deliberately broken frames).
    func send(raw: [UInt8]) {
        state.withLock { s in
            s.lastSend = .now
            if s.handshaken { s.sink?.yield(raw) }
        }
    }

    /// Answers the handshake and opens the socket to hub messages, atomically, so that no broadcast can
    /// slip in before the answer. After a re-attach, our Sequence and the replay follow the answer.
    func completeHandshake(_ answer: [UInt8], resumed: Bool) {
        state.withLock { s in
            s.sink?.yield(answer)
            if resumed {
                s.awaitingSequence = true
                let first = s.unacked.first?.id ?? s.nextSendId
                let sequence = SimMessage.sequence(first)
                s.sink?.yield(
                    s.messagePack ? SimMessagePackProtocol.encode(sequence) : SimJSONHubProtocol.encode(sequence))
                for (_, bytes) in s.unacked { s.sink?.yield(bytes) }
                s.replayed += s.unacked.count
            }
            s.handshaken = true
            s.lastSend = .now
        }
    }

    /// Refuses a handshake (the socket then closes).
    func refuseHandshake(_ answer: [UInt8]) {
        state.withLock { s in _ = s.sink?.yield(answer) }
    }

    /// Records a received message. Returns false when it must be dropped (a replayed duplicate, or a
    /// tracked message before the client's Sequence after a re-attach).
    func received(_ message: SimMessage?) -> Bool {
        state.withLock { s in
            s.lastReceive = .now
            s.messagesReceived += 1
            if case .ping = message { s.pingsReceived += 1 }
            guard stateful, let message else { return true }
            switch message {
            case .ack(let id):
                s.unacked.removeAll { $0.id <= id }
                return false
            case .sequence(let id):
                s.nextIncomingId = id
                s.awaitingSequence = false
                return false
            default:
                guard message.isSequenced else { return true }
                if s.awaitingSequence { return false }
                let id = s.nextIncomingId
                s.nextIncomingId += 1
                guard id > s.lastReceived else { return false }
                s.lastReceived = id
                return true
            }
        }
    }

    /// The Ack to send for what was received, if anything new was.
    var ackId: Int64 { state.withLock { $0.lastReceived } }

    struct Stats {
        var replayed: Int
        var pingsReceived: Int
        var messagesReceived: Int
        /// Sent on a stateful connection and not yet acknowledged: 0 once the client confirmed all it was sent.
        var unacknowledged: Int
        var lastReceive: ContinuousClock.Instant
        var lastSend: ContinuousClock.Instant
    }

    var snapshot: Stats {
        state.withLock {
            Stats(
                replayed: $0.replayed, pingsReceived: $0.pingsReceived, messagesReceived: $0.messagesReceived,
                unacknowledged: $0.unacked.count, lastReceive: $0.lastReceive, lastSend: $0.lastSend)
        }
    }
}

/// The hub: negotiated connection tokens, connected clients, broadcasts, client results.
actor Hub {
    private var negotiated: [String: (id: String, stateful: Bool)] = [:]  // connectionToken -> connection
    private var clients: [String: HubClient] = [:]  // connectionToken -> client
    private var pendingClientResults: [String: CheckedContinuation<SimMessage.Outcome, Never>] = [:]
    private var nextInvocation = 1
    private(set) var totalConnections = 0
    private(set) var negotiations = 0
    private(set) var canceledStreams = 0
    /// CancelInvocation for an invocation that is not a stream (`Hang`, say).
    private(set) var canceledInvocations = 0
    private(set) var reattachments = 0
    private var silencedUntil: [String: ContinuousClock.Instant] = [:]
    private let logger: Logger
    /// How long a stateful connection without a socket waits to be re-attached.
    private let reattachWindow: Duration = .seconds(30)

    init(logger: Logger) { self.logger = logger }

    /// Version 1 hands out a secret connection token for `id=`; version 0 (clients that do not ask for 1)
    /// uses the connection id itself, as ASP.NET Core does.
    func negotiate(version: Int, stateful: Bool, transports: [String]) -> SimNegotiation {
        negotiations += 1
        let id = UUID().uuidString
        let token = version >= 1 ? UUID().uuidString + UUID().uuidString : id
        negotiated[token] = (id, stateful && version >= 1)
        return SimNegotiation(
            connectionId: id, connectionToken: version >= 1 ? token : nil, negotiateVersion: min(version, 1),
            transports: transports.map { ($0, $0 == "ServerSentEvents" ? ["Text"] : ["Text", "Binary"]) },
            statefulReconnect: stateful && version >= 1)
    }

    /// Claims a connection for a new socket: a fresh negotiated one, or a stateful one waiting to be re-attached.
    /// Nil: unknown id (404 in ASP.NET Core) or one that has a socket already (409).
    func attach(
        token: String?, sink: AsyncStream<[UInt8]>.Continuation
    ) -> (client: HubClient, generation: Int, resumed: Bool)? {
        guard let token else {
            // Skip-negotiation clients come without an id.
            let client = HubClient(connectionId: UUID().uuidString, token: UUID().uuidString, stateful: false)
            clients[client.token] = client
            totalConnections += 1
            return (client, client.attach(sink), false)
        }
        if let existing = clients[token] {
            guard existing.stateful, !existing.isForgotten else { return nil }
            // The client may notice a dead link before we do: as ASP.NET Core does, the new socket replaces the old.
            existing.endSocket()
            reattachments += 1
            return (existing, existing.attach(sink), true)
        }
        guard let entry = negotiated[token] else { return nil }
        let client = HubClient(connectionId: entry.id, token: token, stateful: entry.stateful)
        clients[token] = client
        totalConnections += 1
        return (client, client.attach(sink), false)
    }

    /// A socket ended. A stateful connection waits for a re-attach; any other one is gone.
    func detach(_ client: HubClient, generation: Int) {
        guard client.detach(generation: generation) else { return }  // a newer socket took over
        guard client.stateful, !client.isForgotten else {
            forget(client)
            return
        }
        let window = reattachWindow
        Task {
            try? await Task.sleep(for: window)
            self.expire(client)
        }
    }

    private func expire(_ client: HubClient) {
        if !client.isAttached { forget(client) }
    }

    private func forget(_ client: HubClient) {
        if clients[client.token] === client { clients[client.token] = nil }
        negotiated[client.token] = nil
    }

    var connected: [HubClient] { clients.values.filter(\.isAttached) }

    func streamCanceled() { canceledStreams += 1 }
    func invocationCanceled() { canceledInvocations += 1 }

    func silence(_ client: HubClient, for duration: Duration) {
        silencedUntil[client.token] = .now + duration
    }

    func isSilenced(_ client: HubClient) -> Bool {
        silencedUntil[client.token].map { $0 > .now } ?? false
    }

    /// To every connection, including stateful ones between sockets (they get it on re-attach).
    func broadcast(_ target: String, _ arguments: [SimValue]) {
        let message = SimMessage.event(target, arguments)
        for c in clients.values { c.send(message) }
    }

    func broadcast(raw: [UInt8]) {
        for c in clients.values { c.send(raw: raw) }
    }

    /// Ends every socket abruptly (no Close message), as a crashed server or a cut network would.
    /// With `forget`, stateful connections cannot be re-attached either (as after a server restart).
    func dropAll(forget: Bool = false) {
        for c in clients.values { c.endSocket(forget: forget) }
        if forget {
            clients = [:]
            negotiated = [:]
        }
    }

    func closeAll(error: String?, allowReconnect: Bool) {
        for c in clients.values {
            c.send(.close(error: error, allowReconnect: allowReconnect))
            c.endSocket(forget: true)
        }
    }

    /// Asks every connected client for a result (client results) and returns what each answered.
    func invokeClients(_ target: String, _ arguments: [SimValue]) async -> [SimMessage.Outcome] {
        var answers: [SimMessage.Outcome] = []
        for c in connected {
            let id = "s\(nextInvocation)"
            nextInvocation += 1
            let answer = await withCheckedContinuation { (cont: CheckedContinuation<SimMessage.Outcome, Never>) in
                pendingClientResults[id] = cont
                c.send(.invocation(.init(id: id, target: target, arguments: arguments)))
            }
            answers.append(answer)
        }
        return answers
    }

    func clientCompleted(_ id: String, _ outcome: SimMessage.Outcome) -> Bool {
        guard let c = pendingClientResults.removeValue(forKey: id) else { return false }
        c.resume(returning: outcome)
        return true
    }
}
