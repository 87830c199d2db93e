import Foundation
import HTTPTransport
import Logging
import SignalRProtocol
import WebSocketTransport

// The link: start and stop, negotiate, the WebSocket and the handshake, keep-alive and server timeout, the end
// of a link and stateful reconnect's re-attach. Every decision is ConnectionStateMachine's; this performs them.
extension HubConnection {
    // MARK: - Start and stop

    /// Connects: negotiate, WebSocket, handshake. With `startRetryPolicy`, failed attempts are retried.
    public func start() async throws(HubConnectionError) {
        guard machine.state == .disconnected else {
            throw HubConnectionError(.invalidState, "Cannot start a connection that is \(state.rawValue).")
        }
        try await drive(machine.start(at: .now), fromStart: true)
    }

    /// Closes the connection for good: pending invocations fail, a reconnect in progress stops.
    public func stop() async {
        reconnectTask?.cancel()
        // A start in progress learns of the stop from the machine and throws there, not here.
        _ = try? perform(machine.stop().filter { if case .failStart = $0 { false } else { true } })
        guard let link else { return }
        // A graceful end: tell the hub, then close the WebSocket.
        try? link.socket.send(.text(JSONHubProtocol.encode(.close(.init()))))
        await link.socket.close(code: 1000, reason: "")
        await linkEnded(generation: link.generation, error: nil)
    }

    /// The one retry loop, for the first start, reconnects and re-attaches: carries out the machine's actions, makes
    /// the attempt it asks for after its pause, and feeds the outcome back, until no attempt is asked for.
    func drive(_ first: [ConnectionStateMachine.Action], fromStart: Bool) async throws(HubConnectionError) {
        var actions = first
        while let (mode, pause) = try perform(actions) {
            if pause > .zero { try? await Task.sleep(for: pause) }
            guard machine.isAttempting, fromStart || !Task.isCancelled else {
                if fromStart { throw HubConnectionError(.stopped, "The connection was stopped while starting.") }
                return
            }
            do {
                switch mode {
                case .newConnection: try await connect()
                case .reattach: try await reattach()
                }
                actions = machine.attemptSucceeded(at: .now)
            } catch {
                actions = machine.attemptFailed(error, at: .now)
                continue
            }
            guard machine.phase == .connected else {  // stopped while the attempt was under way
                if let link {
                    await link.socket.close(code: 1000, reason: "")
                    await linkEnded(generation: link.generation, error: nil)
                }
                dropConnectionState()
                if fromStart { throw HubConnectionError(.stopped, "The connection was stopped while starting.") }
                return
            }
        }
    }

    /// Carries out everything but an attempt, which it returns (mode and pause). A failed start throws.
    func perform(_ actions: [ConnectionStateMachine.Action]) throws(HubConnectionError) -> (ConnectionStateMachine.Mode, Duration)? {
        var next: (ConnectionStateMachine.Mode, Duration)?
        for action in actions {
            switch action {
            case .attempt(let mode, let pause): next = (mode, pause)
            case .announceConnected(let again): emit(again ? .reconnected(connectionId: connectionId) : .connected(connectionId: connectionId))
            case .announce(let event): emit(event)
            case .forgetConnection: dropConnectionState()
            case .failStart(let error): throw error
            case .log(let level, let text, let reason): logger.log(level: level, "\(text)", metadata: reason.map { ["reason": "\($0)"] })
            }
        }
        return next
    }

    func token(fresh: Bool) async throws(HubConnectionError) -> String? {
        guard let provider = options.accessTokenProvider else { return nil }
        if !fresh, let cachedToken { return cachedToken }
        do {
            cachedToken = try await provider()
        } catch {
            throw HubConnectionError(.unauthorized, "The access token provider failed: \(error)")
        }
        if let token = cachedToken, !HeaderValue.isSafe(token) {
            cachedToken = nil
            throw HubConnectionError(
                .unauthorized, "The access token holds a line break or another control character: refused (check the token file).")
        }
        return cachedToken
    }

    /// One whole connection attempt. The token source is asked each time; a 401 gets one fresh token.
    func connect() async throws(HubConnectionError) {
        let negotiator = Negotiator(options: options, logger: logger)
        var negotiated: NegotiatedTransport
        do {
            negotiated = try await negotiator.negotiate(hubURL: url, accessToken: try await token(fresh: true))
        } catch where error.kind == .unauthorized && options.accessTokenProvider != nil {
            logger.info("token refused; asking the token source once more")
            await options.accessTokenRefused?()
            negotiated = try await negotiator.negotiate(hubURL: url, accessToken: try await token(fresh: true))
        }
        var wsOptions = options.webSocket
        wsOptions.headers = options.headers + [("User-Agent", options.userAgent)]
        if let t = negotiated.accessToken, !options.accessTokenInQuery {
            wsOptions.headers.append(("Authorization", "Bearer \(t)"))
        }
        let socket = try await openSocket(negotiated.webSocketURL, wsOptions)
        let leftover = try await handshake(socket, version: negotiated.statefulReconnect ? 2 : 1)
        stateful = negotiated.statefulReconnect ? StatefulReconnectBuffer(capacity: options.statefulReconnectBufferSize) : nil
        reattachTarget = negotiated.statefulReconnect ? (negotiated.webSocketURL, wsOptions) : nil
        connectionId = negotiated.connectionId
        try attach(socket, leftover: leftover)
        logger.info(
            "connected",
            metadata: ["connectionId": "\(connectionId ?? "-")", "url": "\(url.redactedForLogs)", "stateful": "\(stateful != nil)"])
    }

    func openSocket(_ url: URL, _ wsOptions: WebSocketOptions) async throws(HubConnectionError) -> WebSocket {
        do {
            return try await WebSocket.connect(to: url, options: wsOptions, logger: logger, loop: loop)
        } catch {
            if case .upgradeRejected(let status) = error.kind, status == 401 || status == 403 {
                throw HubConnectionError(.unauthorized, error.message)
            }
            throw HubConnectionError(.transport(error.kind), error.message)
        }
    }

    /// Makes `socket` the live link: sends `first` (a re-attach's Sequence and replay), handles what came
    /// with the handshake answer, starts the loops.
    func attach(_ socket: WebSocket, leftover: [UInt8], first: [[UInt8]] = []) throws(HubConnectionError) {
        do {
            for bytes in first { try socket.send(.text(bytes)) }
        } catch {
            throw HubConnectionError(.transport(error.kind), error.message)
        }
        linkGeneration += 1
        let generation = linkGeneration
        link = Link(socket: socket, generation: generation)
        if !leftover.isEmpty { process(frame: leftover, generation: generation) }
        link?.receiveTask = Task { [weak self] in await self?.receiveLoop(socket, generation: generation) }
        link?.keepAliveTask = Task { [weak self] in await self?.keepAliveLoop(generation: generation) }
    }

    /// Sends the handshake request and reads the answer; returns what followed it in the same frame.
    func handshake(_ socket: WebSocket, version: Int) async throws(HubConnectionError) -> [UInt8] {
        do {
            try socket.send(.text(Handshake.encode(Handshake.Request(version: version))))
        } catch {
            throw HubConnectionError(.handshakeFailed, "Could not send the handshake: \(error.message)")
        }
        let timeout = options.handshakeTimeout
        let began = ContinuousClock.now
        let timer = Task {
            try await Task.sleep(for: timeout)
            await socket.close(code: 1000, reason: "handshake timeout")
        }
        defer { timer.cancel() }
        var buffer: [UInt8] = []
        var iterator = socket.messages.makeAsyncIterator()
        while true {
            let message: WebSocketMessage?
            do {
                message = try await iterator.next()
            } catch {
                throw HubConnectionError(.handshakeFailed, "The connection ended during the handshake: \(error.message)")
            }
            guard let message else {
                await socket.close()
                if ContinuousClock.now - began >= timeout {
                    throw HubConnectionError(.handshakeFailed, "The server did not answer the handshake within \(timeout).")
                }
                throw HubConnectionError(.handshakeFailed, "The connection closed during the handshake.")
            }
            buffer += message.bytes
            do {
                if let (response, rest) = try Handshake.decodeResponse(buffer) {
                    if let error = response.error {
                        await socket.close()
                        throw HubConnectionError(.handshakeFailed, "The server refused the handshake: \(error)")
                    }
                    return Array(rest)
                }
            } catch let error as HubProtocolError {
                await socket.close()
                throw HubConnectionError(.handshakeFailed, "The handshake answer is not valid: \(error.message)")
            } catch let error as HubConnectionError {
                throw error
            } catch {
                throw HubConnectionError(.handshakeFailed, "\(error)")
            }
        }
    }


    // MARK: - Keep-alive and server timeout

    func keepAliveLoop(generation: Int) async {
        while !Task.isCancelled {
            guard let link, link.generation == generation else { return }
            let next: ContinuousClock.Instant
            switch machine.keepAlive(at: .now, lastSend: link.lastSend, lastReceive: link.lastReceive, heldBack: link.heldBack) {
            case .serverTimedOut:
                logger.warning("Server timeout elapsed without receiving a message from the server.")
                self.link?.endReason = HubConnectionError(
                    .serverTimeout, "Server timeout elapsed without receiving a message from the server.")
                await link.socket.close(code: 1000, reason: "server timeout")
                return
            case .ping(let at):
                try? write(.ping)
                next = at
            case .wait(let until):
                next = until
            }
            try? await Task.sleep(until: next, clock: .continuous)
        }
    }

    // MARK: - The link ends

    func linkEnded(generation: Int, error: HubConnectionError?) async {
        guard let current = link, current.generation == generation else { return }
        current.keepAliveTask?.cancel()
        current.receiveTask?.cancel()
        link = nil
        // What is to be said is said now (subscribers hear of the loss before any retry); the retries run apart.
        guard let (mode, pause) = (try? perform(machine.linkEnded(error, stateful: stateful != nil, at: .now))) ?? nil else { return }
        reconnectTask = Task { [weak self] in try? await self?.drive([.attempt(mode, after: pause)], fromStart: false) }
    }

    /// Forgets everything tied to the logical connection: pending invocations fail, sequencing ends.
    func dropConnectionState() {
        connectionId = nil
        for (_, entry) in pending {
            switch entry {
            case .invocation(_, let c): c.resume(throwing: HubConnectionError.canceledByClose)
            case .stream(_, let c): c.finish(throwing: HubConnectionError.canceledByClose)
            }
        }
        pending = [:]
        stateful = nil
        reattachTarget = nil
        ackTask?.cancel()
        ackTask = nil
        let waiters = sendSpaceWaiters
        sendSpaceWaiters = []
        waiters.forEach { $0.resume() }
    }

    /// Opens the same connection id again, then both sides say where they resume and replay.
    func reattach() async throws(HubConnectionError) {
        guard let target = reattachTarget, stateful != nil else {
            throw HubConnectionError(.invalidState, "Nothing to re-attach.")
        }
        let socket = try await openSocket(target.url, target.options)
        let leftover = try await handshake(socket, version: 2)
        let (sequenceId, replay) = stateful!.beginReattach()
        try attach(socket, leftover: leftover, first: [JSONHubProtocol.encode(.sequence(sequenceId: sequenceId))] + replay)
    }

    /// Acks are coalesced: one about a second after the first unacknowledged receipt.
    func scheduleAck() {
        guard ackTask == nil else { return }
        ackTask = Task { [weak self] in
            try? await Task.sleep(for: .seconds(1))
            await self?.sendAck()
        }
    }

    func sendAck() {
        ackTask = nil
        guard let id = stateful?.lastReceived, id > 0 else { return }
        try? write(.ack(sequenceId: id))
    }

    /// With stateful reconnect, a full replay buffer makes senders wait for the peer's Acks.
    func waitForSendSpace() async {
        while stateful?.isFull == true {
            await withCheckedContinuation { sendSpaceWaiters.append($0) }
        }
    }
}
