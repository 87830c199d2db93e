import Foundation

/// One connection's incoming side, whatever carries it (a WebSocket's messages, the POSTs of Server-Sent Events or
/// Long Polling): the handshake, then hub messages in the protocol the handshake chose.
actor HubSession {
    let sim: HubSimulator
    let client: HubClient
    let transport: String
    let resumed: Bool
    private var handshakeDone = false
    private var lastAck: Int64 = 0
    private var buffer: [UInt8] = []
    private var streams: [String: Task<Void, Never>] = [:]

    init(_ sim: HubSimulator, _ client: HubClient, transport: String, resumed: Bool) {
        self.sim = sim
        self.client = client
        self.transport = transport
        self.resumed = resumed
    }

    func end() {
        streams.values.forEach { $0.cancel() }
        streams = [:]
    }

    /// Handles one transport message. False: the connection is over.
    func receive(_ incoming: [UInt8]) async -> Bool {
        var bytes = incoming
        if !handshakeDone {
            _ = client.received(nil)
            buffer += bytes
            let parsed: (request: SimHandshake.Request, rest: ArraySlice<UInt8>)?
            do {
                parsed = try SimHandshake.request(buffer)
            } catch {
                client.refuseHandshake(SimHandshake.response(error: error.description))
                return false
            }
            guard let (request, rest) = parsed else { return true }
            if let refusal = refusal(request) {
                sim.logger.warning("refused handshake: \(refusal)")
                client.refuseHandshake(SimHandshake.response(error: refusal))
                return false
            }
            handshakeDone = true
            client.speaksMessagePack = request.protocolName == "messagepack"
            client.completeHandshake(SimHandshake.response(), resumed: resumed)
            switch sim.flapMode {
            case "close": client.send(.close(error: "Flapping hub (simulated).", allowReconnect: true))
            case "malformed": client.send(raw: Array("{\"type\":1,\"target\":".utf8) + [0x1E])
            default: break
            }
            bytes = Array(rest)
            if bytes.isEmpty { return true }
        }
        let messages: [SimMessage?]
        do {
            messages =
                try client.speaksMessagePack ? SimMessagePackProtocol.decode(bytes) : SimJSONHubProtocol.decode(bytes)
        } catch {
            sim.logger.error("client broke the protocol: \(error)")
            client.send(.close(error: "Connection closed with an error. \(error)", allowReconnect: false))
            return false
        }
        for decoded in messages {
            guard client.received(decoded), let decoded else { continue }
            switch decoded {
            case .invocation(let inv):
                await sim.invokeHubMethod(inv, client: client)
            case .streamInvocation(let inv):
                let (sim, client) = (self.sim, self.client)
                streams[inv.id ?? ""] = Task { await sim.stream(inv, client: client) }
            case .cancelInvocation(let id):
                if let stream = streams.removeValue(forKey: id) {
                    stream.cancel()
                } else {
                    await sim.hub.invocationCanceled()  // a non-streaming invocation (ASP.NET Core 11 allows it)
                }
            case .completion(let id, let outcome):
                if !(await sim.hub.clientCompleted(id, outcome)) {
                    sim.logger.warning("completion for unknown invocation \(id)")
                }
            case .close:
                return false
            case .ping, .streamItem, .ack, .sequence:
                break
            }
        }
        if client.stateful, client.ackId > lastAck {
            lastAck = client.ackId
            client.send(.ack(lastAck))
        }
        return true
    }

    /// Why a handshake is refused (ASP.NET Core's texts), or nil. ASP.NET Core accepts any version up to its own
    /// (signalrcore, for one, sends 0); version 2 (Ack/Sequence) only for a connection that negotiated stateful reconnect.
    private func refusal(_ request: SimHandshake.Request) -> String? {
        let name = request.protocolName
        guard name == "json" || name == "messagepack", sim.acceptsProtocol(name) else {
            return "The protocol '\(name)' is not supported."
        }
        if name == "messagepack" && transport == "ServerSentEvents" {
            return
                "Cannot use the '\(name)' protocol on the current transport. The transport does not support 'Binary' transfer format."
        }
        guard request.version <= (client.stateful ? 2 : 1) else {
            return "The server does not support version \(request.version) of the '\(name)' protocol."
        }
        return nil
    }
}

extension HubSimulator {
    /// The hub methods a client may call: a small generic surface for tests of invoke, errors and streams.
    func invokeHubMethod(_ inv: SimMessage.Invocation, client: HubClient) async {
        let outcome: SimMessage.Outcome
        switch inv.target {
        case "Echo":
            outcome = .result(inv.arguments.first ?? .null)
        case "Add":
            let sum = inv.arguments.compactMap(\.intValue).reduce(0, +)
            outcome = .result(.number(Decimal(sum)))
        case "Fail":
            outcome = .error(inv.arguments.first?.stringValue ?? "Failed on purpose.")
        case "Void":
            outcome = .void
        case "Hang":
            return  // never answers: lets tests see pending invocations fail when the link drops
        case "Headers":
            // The invocation's own headers, as the server received them (trace context, for one).
            outcome = .result(.object(inv.headers.sorted { $0.key < $1.key }.map { ($0.key, .string($0.value)) }))
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
                let amount = a[1].decimalValue, let type = a[2].stringValue,
                let desc = a[3].stringValue
            else {
                outcome = .error("AddTransaction expects (childId, amount, type, description).")
                break
            }
            do {
                let t = try await createTransaction(
                    childId: child, amount: amount, type: type, description: desc, by: "Hub", idempotencyKey: nil)
                outcome = .result(SimJSON.value(t))
            } catch {
                outcome = .error(error.message)
            }
        default:
            outcome = .error(
                "Failed to invoke '\(inv.target)' due to an error on the server. HubException: Method does not exist.")
        }
        guard let id = inv.id else { return }
        client.send(.completion(id: id, outcome))
    }

    /// `Counter(count, delayMs)`: a server-to-client stream of 0..<count.
    func stream(_ inv: SimMessage.Invocation, client: HubClient) async {
        guard let id = inv.id else { return }
        guard inv.target == "Counter" else {
            client.send(.completion(id: id, .error("Failed to invoke '\(inv.target)': not a stream method.")))
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
            client.send(.streamItem(id: id, item: .number(Decimal(i))))
            try? await Task.sleep(for: .milliseconds(delay))
        }
        if !Task.isCancelled { client.send(.completion(id: id, .void)) }
    }
}
