import Foundation
import Logging
import SignalRProtocol
import Synchronization

/// One client's hub connection as the simulator sees it.
final class HubClient: Sendable {
    let connectionId: String
    let token: String
    /// Every frame to this client goes through this queue, so writes keep their order.
    let outgoing: AsyncStream<[UInt8]>.Continuation
    private let stats = Mutex(Stats())

    struct Stats {
        var pingsReceived = 0
        var lastReceive = ContinuousClock.now
        var lastSend = ContinuousClock.now
        var messagesReceived = 0
    }

    init(connectionId: String, token: String, outgoing: AsyncStream<[UInt8]>.Continuation) {
        self.connectionId = connectionId
        self.token = token
        self.outgoing = outgoing
    }

    func send(_ message: HubMessage) { send(raw: JSONHubProtocol.encode(message)) }

    func send(raw: [UInt8]) {
        stats.withLock { $0.lastSend = .now }
        outgoing.yield(raw)
    }

    func received(_ message: HubMessage?) {
        stats.withLock { s in
            s.lastReceive = .now
            s.messagesReceived += 1
            if case .ping = message { s.pingsReceived += 1 }
        }
    }

    var snapshot: Stats { stats.withLock { $0 } }
}

/// The hub: negotiated connection tokens, connected clients, broadcasts, the hub methods clients may call.
actor Hub {
    private var negotiated: [String: String] = [:]  // connectionToken -> connectionId
    private var clients: [String: HubClient] = [:]  // connectionToken -> client
    private var pendingClientResults: [String: CheckedContinuation<HubMessage.Completion, Never>] = [:]
    private var nextInvocation = 1
    private(set) var totalConnections = 0
    private(set) var canceledStreams = 0
    private let logger: Logger
    private var silencedUntil: [String: ContinuousClock.Instant] = [:]

    init(logger: Logger) { self.logger = logger }

    /// Version 1 hands out a secret connection token for `id=`; version 0 (clients that do not ask for 1)
    /// uses the connection id itself, as ASP.NET Core does.
    func negotiate(version: Int) -> NegotiateResponse.Connection {
        let id = UUID().uuidString
        let token = version >= 1 ? UUID().uuidString + UUID().uuidString : id
        negotiated[token] = id
        return NegotiateResponse.Connection(
            connectionId: id, connectionToken: version >= 1 ? token : nil, negotiateVersion: min(version, 1),
            availableTransports: [.init(transport: "WebSockets", transferFormats: ["Text", "Binary"])])
    }

    /// Claims a negotiated token for a socket. Nil: unknown token (404 in ASP.NET Core) or already in use (409).
    func attach(token: String?, outgoing: AsyncStream<[UInt8]>.Continuation) -> HubClient? {
        let connectionToken = token ?? UUID().uuidString  // skip-negotiation clients come without an id
        if token != nil {
            guard let id = negotiated[connectionToken], clients[connectionToken] == nil else { return nil }
            let client = HubClient(connectionId: id, token: connectionToken, outgoing: outgoing)
            clients[connectionToken] = client
            totalConnections += 1
            return client
        }
        let client = HubClient(connectionId: connectionToken, token: connectionToken, outgoing: outgoing)
        clients[connectionToken] = client
        totalConnections += 1
        return client
    }

    func detach(_ client: HubClient) {
        clients[client.token] = nil
        negotiated[client.token] = nil
        client.outgoing.finish()
    }

    var connected: [HubClient] { Array(clients.values) }

    func streamCanceled() { canceledStreams += 1 }

    func silence(_ client: HubClient, for duration: Duration) {
        silencedUntil[client.token] = .now + duration
    }

    func isSilenced(_ client: HubClient) -> Bool {
        silencedUntil[client.token].map { $0 > .now } ?? false
    }

    func broadcast(_ target: String, _ arguments: [JSONValue]) {
        let frame = JSONHubProtocol.encode(.invocation(.init(target: target, arguments: arguments)))
        for c in clients.values { c.send(raw: frame) }
    }

    func broadcast(raw: [UInt8]) {
        for c in clients.values { c.send(raw: raw) }
    }

    /// Ends every connection abruptly (no Close message), as a crashed server or a cut network would.
    func dropAll() {
        for c in clients.values { c.outgoing.finish() }
    }

    func closeAll(error: String?, allowReconnect: Bool) {
        for c in clients.values {
            c.send(.close(.init(error: error, allowReconnect: allowReconnect)))
            c.outgoing.finish()
        }
    }

    /// Asks every client for a result (client results) and returns what each answered.
    func invokeClients(_ target: String, _ arguments: [JSONValue]) async -> [HubMessage.Completion] {
        var answers: [HubMessage.Completion] = []
        for c in clients.values {
            let id = "s\(nextInvocation)"
            nextInvocation += 1
            let answer = await withCheckedContinuation { (cont: CheckedContinuation<HubMessage.Completion, Never>) in
                pendingClientResults[id] = cont
                c.send(.invocation(.init(invocationId: id, target: target, arguments: arguments)))
            }
            answers.append(answer)
        }
        return answers
    }

    func clientCompleted(_ completion: HubMessage.Completion) -> Bool {
        guard let c = pendingClientResults.removeValue(forKey: completion.invocationId) else { return false }
        c.resume(returning: completion)
        return true
    }
}
