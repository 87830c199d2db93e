import Foundation
import Hummingbird
import HummingbirdWebSocket
import NIOCore
import SignalRProtocol

extension HubSimulator {
    /// The hub endpoint: `GET /hubs/family?id=<connectionToken>` upgraded to a WebSocket.
    ///
    /// Hummingbird answers every refused upgrade with 400, so a missing token or an unknown id shows up as 400
    /// here (ASP.NET Core says 401 and 404); negotiate, which comes first, does answer 401.
    func hubRouter() -> Router<BasicWebSocketRequestContext> {
        let router = Router(context: BasicWebSocketRequestContext.self)
        router.ws("hubs/family") { request, _ in
            guard self.isValid(self.bearer(request)) else { return .dontUpgrade }
            if self.isRefusing { return .dontUpgrade }
            return .upgrade()
        } onUpgrade: { inbound, outbound, context in
            let id = context.request.uri.queryParameters["id"].map(String.init)
            let bearer = self.bearer(context.request)
            let (frames, continuation) = AsyncStream<[UInt8]>.makeStream()
            guard let (client, generation, resumed) = await self.hub.attach(token: id, sink: continuation) else {
                self.logger.warning("refused a socket for an unknown or already connected id")
                try await outbound.close(.policyViolation, reason: "unknown or already connected id")
                return
            }
            self.logger.info("client \(resumed ? "re-attached" : "connected")", metadata: ["connectionId": "\(client.connectionId)"])
            defer { self.logger.info("client disconnected", metadata: ["connectionId": "\(client.connectionId)"]) }
            let binary = self.configuration.binaryFrames
            try await withThrowingTaskGroup(of: Void.self) { group in
                // Writer: the only place that writes to this socket, so frames keep their order.
                group.addTask {
                    for await frame in frames {
                        if binary {
                            try await outbound.write(.binary(ByteBuffer(bytes: frame)))
                        } else {
                            try await outbound.write(.text(String(decoding: frame, as: UTF8.self)))
                        }
                    }
                }
                // Pings when idle; drops a client that stays silent past the timeout.
                group.addTask { try await self.keepAlive(client, bearer: bearer) }
                group.addTask {
                    try await self.serve(client, inbound, resumed: resumed)
                    client.endSocket(generation: generation)
                }
                // The first task to end (writer finished, timeout, client gone) ends the connection.
                try await group.next()
                group.cancelAll()
            }
            await self.hub.detach(client, generation: generation)
        }
        return router
    }

    private func keepAlive(_ client: HubClient, bearer: String?) async throws {
        let interval = configuration.keepAliveInterval
        while !Task.isCancelled {
            try await Task.sleep(for: min(interval, .seconds(1)))
            let s = client.snapshot
            if ContinuousClock.now - s.lastReceive > configuration.clientTimeout {
                logger.warning("client timed out", metadata: ["connectionId": "\(client.connectionId)"])
                return
            }
            if mustCloseForExpiry(bearer) {
                logger.notice("ending a connection: its access token expired", metadata: ["connectionId": "\(client.connectionId)"])
                return
            }
            if ContinuousClock.now - s.lastSend >= interval, !(await hub.isSilenced(client)) {
                client.send(.ping)
            }
        }
    }

    /// Reads the handshake, then hub messages, until the client goes away.
    private func serve(_ client: HubClient, _ inbound: WebSocketInboundStream, resumed: Bool) async throws {
        var handshakeDone = false
        var lastAck: Int64 = 0
        var buffer: [UInt8] = []
        var streams: [String: Task<Void, Never>] = [:]
        defer { streams.values.forEach { $0.cancel() } }
        for try await message in inbound.messages(maxSize: 1 << 20) {
            var bytes: [UInt8]
            switch message {
            case .text(let s): bytes = Array(s.utf8)
            case .binary(let b): bytes = Array(b.readableBytesView)
            }
            if !handshakeDone {
                _ = client.received(nil)
                buffer += bytes
                let parsed: (request: Handshake.Request, rest: ArraySlice<UInt8>)?
                do {
                    parsed = try Handshake.decodeRequest(buffer)
                } catch {
                    client.refuseHandshake(Handshake.encode(Handshake.Response(error: error.message)))
                    return
                }
                guard let (request, rest) = parsed else { continue }
                // ASP.NET Core accepts any version up to its own (signalrcore, for one, sends 0);
                // version 2 (Ack/Sequence) only for a connection that negotiated stateful reconnect.
                guard request.protocolName == JSONHubProtocol.name, request.version <= (client.stateful ? 2 : 1) else {
                    logger.warning("refused handshake for version \(request.version) of '\(request.protocolName)'")
                    client.refuseHandshake(Handshake.encode(Handshake.Response(
                        error: "The server does not support version \(request.version) of the '\(request.protocolName)' protocol.")))
                    return
                }
                handshakeDone = true
                client.completeHandshake(Handshake.encode(Handshake.Response()), resumed: resumed)
                switch flapMode {
                case "close": client.send(.close(.init(error: "Flapping hub (simulated).", allowReconnect: true)))
                case "malformed": client.send(raw: Array("{\"type\":1,\"target\":".utf8) + [0x1E])
                default: break
                }
                bytes = Array(rest)
                if bytes.isEmpty { continue }
            }
            let (pieces, _) = TextMessageFormat.split(bytes)
            for piece in pieces {
                let decoded: HubMessage?
                do {
                    decoded = try JSONHubProtocol.decode(piece)
                } catch {
                    logger.error("client broke the protocol: \(error)")
                    client.send(.close(.init(error: "Connection closed with an error. \(error.message)")))
                    return
                }
                guard client.received(decoded), let decoded else { continue }
                switch decoded {
                case .invocation(let inv):
                    await invokeHubMethod(inv, client: client)
                case .streamInvocation(let inv):
                    streams[inv.invocationId ?? ""] = Task { await self.stream(inv, client: client) }
                case .cancelInvocation(let id, _):
                    streams.removeValue(forKey: id)?.cancel()
                case .completion(let c):
                    if !(await hub.clientCompleted(c)) { logger.warning("completion for unknown invocation \(c.invocationId)") }
                case .close:
                    return
                case .ping, .streamItem, .ack, .sequence:
                    break
                }
            }
            if client.stateful, client.ackId > lastAck {
                lastAck = client.ackId
                client.send(.ack(sequenceId: lastAck))
            }
        }
    }

    /// The hub methods a client may call: a small generic surface for tests of invoke, errors and streams.
    private func invokeHubMethod(_ inv: HubMessage.Invocation, client: HubClient) async {
        let outcome: HubMessage.Completion.Outcome
        switch inv.target {
        case "Echo":
            outcome = .result(inv.arguments.first ?? .null)
        case "Add":
            let sum = inv.arguments.compactMap(\.intValue).reduce(0, +)
            outcome = .result(.number(String(sum)))
        case "Fail":
            outcome = .error(inv.arguments.first?.stringValue ?? "Failed on purpose.")
        case "Void":
            outcome = .void
        case "Hang":
            return  // never answers: lets tests see pending invocations fail when the link drops
        case "GetConnectionId":
            outcome = .result(.string(client.connectionId))
        case "Silence":
            // Stop pinging this client for N ms, so its server timeout can be tested.
            let ms = inv.arguments.first?.intValue ?? 1000
            await hub.silence(client, for: .milliseconds(ms))
            outcome = .void
        case "AddTransaction":
            // Hub-side write for clients that prefer it to REST: (childId, amount, type, description).
            let a = inv.arguments
            guard a.count == 4, let child = a[0].stringValue.flatMap(UUID.init(uuidString:)),
                case .number(let n) = a[1], let amount = Decimal(string: n), let type = a[2].stringValue,
                let desc = a[3].stringValue
            else {
                outcome = .error("AddTransaction expects (childId, amount, type, description).")
                break
            }
            do {
                let t = try await createTransaction(childId: child, amount: amount, type: type, description: desc, by: "Hub", idempotencyKey: nil)
                outcome = .result(SimJSON.value(t))
            } catch {
                outcome = .error(error.message)
            }
        default:
            outcome = .error("Failed to invoke '\(inv.target)' due to an error on the server. HubException: Method does not exist.")
        }
        guard let id = inv.invocationId else { return }
        client.send(.completion(.init(invocationId: id, outcome: outcome)))
    }

    /// `Counter(count, delayMs)`: a server-to-client stream of 0..<count.
    private func stream(_ inv: HubMessage.Invocation, client: HubClient) async {
        guard let id = inv.invocationId else { return }
        guard inv.target == "Counter" else {
            client.send(.completion(.init(invocationId: id, outcome: .error("Failed to invoke '\(inv.target)': not a stream method."))))
            return
        }
        let count = inv.arguments.first?.intValue ?? 10
        let delay = inv.arguments.dropFirst().first?.intValue ?? 10
        for i in 0..<count {
            if Task.isCancelled {
                logger.info("stream \(id) canceled by the client after \(i) items")
                await hub.streamCanceled()
                return
            }
            client.send(.streamItem(.init(invocationId: id, item: .number(String(i)))))
            try? await Task.sleep(for: .milliseconds(delay))
        }
        if !Task.isCancelled { client.send(.completion(.init(invocationId: id, outcome: .void))) }
    }
}
