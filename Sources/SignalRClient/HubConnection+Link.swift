import Foundation
import HTTPTransport
import Logging
import SignalRProtocol
import Tracing
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
        if options.webSocket.allowInsecureTLS {
            // Said once per start, for negotiate and every transport (the WebSocket says it again at each connect).
            logger.warning(
                "TLS certificate and host name checks are OFF for negotiate and every transport (allowInsecureTLS; tests only)",
                metadata: ["host": "\(url.host ?? "")"])
        }
        try await drive(machine.start(at: .now), fromStart: true)
    }

    /// Closes the connection for good: pending invocations fail, a reconnect in progress stops.
    public func stop() async {
        reconnectTask?.cancel()
        pauseTask?.cancel()
        // A start in progress learns of the stop from the machine and throws there, not here.
        _ = try? perform(machine.stop().filter { if case .failStart = $0 { false } else { true } })
        guard let link else { return }
        // A graceful end: tell the hub, then close the transport.
        try? link.transport.send(options.hubProtocol.encode(.close(.init())))
        await link.transport.close()
        await linkEnded(generation: link.generation, error: nil)
    }

    /// The one retry loop, for the first start, reconnects and re-attaches: carries out the machine's actions, makes
    /// the attempt it asks for after its pause, and feeds the outcome back, until no attempt is asked for.
    func drive(_ first: [ConnectionStateMachine.Action], fromStart: Bool) async throws(HubConnectionError) {
        var actions = first
        var serverWasAway = false
        while let (mode, pause) = try perform(actions) {
            if pause > .zero {
                // A task of its own, which `stop` cancels: the first start's retries run in the caller's task, and a
                // stop in a long back-off would otherwise wait for it to end.
                let probe = serverWasAway ? reachabilityProbe() : nil
                let sleeper = Task { await Self.pause(pause, endedEarlyBy: probe) }
                pauseTask = sleeper
                await sleeper.value
                pauseTask = nil
            }
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
                serverWasAway = error.serverUnreachable
                actions = machine.attemptFailed(error, at: .now)
                continue
            }
            guard machine.phase == .connected else {  // stopped while the attempt was under way
                if let link {
                    await link.transport.close()
                    await linkEnded(generation: link.generation, error: nil)
                }
                dropConnectionState()
                if fromStart { throw HubConnectionError(.stopped, "The connection was stopped while starting.") }
                return
            }
        }
    }

    /// Carries out everything but an attempt, which it returns (mode and pause). A failed start throws.
    func perform(
        _ actions: [ConnectionStateMachine.Action]
    ) throws(HubConnectionError) -> (ConnectionStateMachine.Mode, Duration)? {
        var next: (ConnectionStateMachine.Mode, Duration)?
        for action in actions {
            switch action {
            case .attempt(let mode, let pause): next = (mode, pause)
            case .announceConnected(let again):
                emit(again ? .reconnected(connectionId: connectionId) : .connected(connectionId: connectionId))
            case .announce(let event): emit(event)
            case .forgetConnection: dropConnectionState()
            case .failStart(let error): throw error
            case .log(let level, let text, let reason):
                logger.log(level: level, "\(text)", metadata: reason.map { ["reason": "\($0)"] })
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
                .unauthorized,
                "The access token holds a line break or another control character: refused (check the token file).")
        }
        return cachedToken
    }

    /// One whole connection attempt. The token source is asked each time; a 401 gets one fresh token. The transports
    /// are tried in turn, as the official clients do: one that fails to start leads to the next, after a fresh
    /// negotiate (a connection token serves one attempt).
    func connect() async throws(HubConnectionError) {
        let span = linkSpan("connect")
        do {
            try await connect(span)
            span.end(failing: nil)
        } catch {
            span.end(failing: error)
            throw error
        }
    }

    private func connect(_ span: any Span) async throws(HubConnectionError) {
        var negotiated = try await negotiate(span)
        let format = options.hubProtocol.transferFormat
        let (tries, skipped) = negotiated.plan(allowed: options.transports, format: format)
        for reason in skipped { logger.debug("skipping a transport: \(reason)") }
        guard !tries.isEmpty else {
            let offered = negotiated.offered.map(\.transport).joined(separator: ", ")
            throw HubConnectionError(
                .negotiateFailed,
                "None of the transports supported by the client are supported by the server (it offers \(offered.isEmpty ? "none" : offered); \(skipped.joined(separator: " ")))"
            )
        }
        var failures: [(TransportKind, HubConnectionError)] = []
        for (attempt, kind) in tries.enumerated() {
            if attempt > 0 {
                logger.info(
                    "trying the next transport",
                    metadata: ["transport": "\(kind.rawValue)", "after": "\(failures.last!.1.message)"])
                negotiated = try await negotiate(span)
            }
            let transport: any HubTransport
            do {
                transport = try await open(kind, negotiated)
            } catch  where error.kind == .unauthorized || tries.count == 1 {
                throw error
            } catch {
                failures.append((kind, error))
                continue
            }
            let stateful = negotiated.statefulReconnect && kind == .webSockets
            let leftover = try await handshake(transport, version: stateful ? 2 : 1)
            self.stateful = stateful ? StatefulReconnectBuffer(capacity: options.statefulReconnectBufferSize) : nil
            reattachTarget = stateful ? negotiated : nil
            connectionId = negotiated.connectionId
            try attach(transport, leftover: leftover)
            scheduleAuthenticationRefresh(negotiated)
            span.attributes["signalr.transport"] = kind.rawValue
            span.attributes["signalr.protocol"] = options.hubProtocol.rawValue
            logger.info(
                "connected",
                metadata: [
                    "connectionId": "\(connectionId ?? "-")", "url": "\(url.redactedForLogs)",
                    "transport": "\(kind.rawValue)",
                    "protocol": "\(options.hubProtocol.rawValue)", "stateful": "\(stateful)",
                ])
            return
        }
        let list = failures.map { "\($0.0.rawValue) failed: \($0.1.message)" }.joined(separator: " ")
        throw HubConnectionError(
            failures.last!.1.kind, "Unable to connect to the server with any of the available transports. \(list)")
    }

    /// Negotiates, with one fresh token after a refusal; a span inside the connection attempt's.
    func negotiate(_ attempt: any Span) async throws(HubConnectionError) -> Negotiated {
        let span = linkSpan("negotiate", parent: attempt.context)
        let negotiator = Negotiator(options: options, logger: logger)
        do {
            let negotiated: Negotiated
            do {
                negotiated = try await negotiator.negotiate(hubURL: url, accessToken: try await token(fresh: true))
            } catch  where error.kind == .unauthorized && options.accessTokenProvider != nil {
                logger.info("token refused; asking the token source once more")
                await options.accessTokenRefused?()
                negotiated = try await negotiator.negotiate(hubURL: url, accessToken: try await token(fresh: true))
            }
            span.end(failing: nil)
            return negotiated
        } catch {
            span.end(failing: error)
            throw error
        }
    }

    /// Opens `kind` for the negotiated connection, with the headers every request carries.
    func open(_ kind: TransportKind, _ negotiated: Negotiated) async throws(HubConnectionError) -> any HubTransport {
        let headers = options.headers + [("User-Agent", options.userAgent)]
        let bearer = options.accessTokenInQuery ? nil : negotiated.accessToken
        let url = negotiated.transportURL(kind, tokenInQuery: options.accessTokenInQuery)
        let format = options.hubProtocol.transferFormat
        switch kind {
        case .webSockets:
            // The upgrade is authenticated once; a refresh reaches the server through /refresh.
            var wsOptions = options.webSocket
            wsOptions.headers = headers + (bearer.map { [("Authorization", "Bearer \($0)")] } ?? [])
            return WebSocketHubTransport(try await openSocket(url, wsOptions), format: format)
        case .serverSentEvents, .longPolling:
            let token = BearerToken(bearer)
            bearerInUse = options.accessTokenInQuery ? nil : token
            let target = HTTPTransportTarget(
                url: url, headers: headers, bearer: options.accessTokenInQuery ? nil : token,
                trust: options.webSocket.trust,
                proxy: options.webSocket.proxy, maxAnswerBytes: max(4 << 20, 2 * options.webSocket.maxMessageSize),
                client: options.httpClient ?? .shared, format: format)
            if kind == .serverSentEvents {
                return try await ServerSentEventsTransport.open(
                    target, loop: loop, connectTimeout: options.webSocket.connectTimeout)
            }
            return try await LongPollingTransport.open(
                target, loop: loop, connectTimeout: options.webSocket.connectTimeout)
        }
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

    /// Makes `transport` the live link: sends `first` (a re-attach's Sequence and replay), handles what came
    /// with the handshake answer, starts the loops.
    func attach(_ transport: any HubTransport, leftover: [UInt8], first: [[UInt8]] = []) throws(HubConnectionError) {
        for bytes in first { try transport.send(bytes) }
        linkGeneration += 1
        let generation = linkGeneration
        link = Link(transport: transport, generation: generation)
        if !leftover.isEmpty { process(frame: leftover, generation: generation) }
        // Both prefer the loop as their task executor: a continuation resumes a task on its preferred executor, or
        // else on the global pool, which then hops to this actor. Without the preference each frame woke a pool
        // thread only for it to queue the receive loop back on the loop's thread.
        link?.receiveTask = Task(executorPreference: loop.taskExecutor) { [weak self] in
            await self?.receiveLoop(transport, generation: generation)
        }
        keepAlive(generation: generation)
    }

    /// Sends the handshake request (JSON text whatever the protocol) and reads the answer; returns what followed it in
    /// the same transport message.
    func handshake(_ transport: any HubTransport, version: Int) async throws(HubConnectionError) -> [UInt8] {
        let request = Handshake.encode(Handshake.Request(protocolName: options.hubProtocol.rawValue, version: version))
        do {
            // Over a WebSocket the handshake goes in a frame of the protocol's kind (a binary protocol's server reads
            // binary frames); the bytes are the same.
            try transport.send(request)
        } catch {
            throw HubConnectionError(.handshakeFailed, "Could not send the handshake: \(error.message)")
        }
        let timeout = options.handshakeTimeout
        let began = ContinuousClock.now
        let timer = Task {
            try await Task.sleep(for: timeout)
            await transport.close()
        }
        defer { timer.cancel() }
        var buffer: [UInt8] = []
        var iterator = transport.inbox.makeAsyncIterator()
        while true {
            let message: WebSocketMessage?
            do {
                message = try await iterator.next()
            } catch {
                throw HubConnectionError(
                    .handshakeFailed, "The connection ended during the handshake: \(error.message)")
            }
            guard let message else {
                await transport.close()
                if ContinuousClock.now - began >= timeout {
                    throw HubConnectionError(
                        .handshakeFailed, "The server did not answer the handshake within \(timeout).")
                }
                throw HubConnectionError(.handshakeFailed, "The connection closed during the handshake.")
            }
            buffer += message.bytes
            do {
                if let (response, rest) = try Handshake.decodeResponse(buffer) {
                    if let error = response.error {
                        await transport.close()
                        throw HubConnectionError(.handshakeFailed, "The server refused the handshake: \(error)")
                    }
                    return Array(rest)
                }
            } catch let error as HubProtocolError {
                await transport.close()
                throw HubConnectionError(.handshakeFailed, "The handshake answer is not valid: \(error.message)")
            } catch let error as HubConnectionError {
                throw error
            } catch {
                throw HubConnectionError(.handshakeFailed, "\(error)")
            }
        }
    }

    // MARK: - Keep-alive and server timeout

    /// Pings when the link has sent nothing for the keep-alive interval, ends it when the server has said nothing for
    /// the server timeout, and looks again when the next of the two is due. The wait is a timer of the loop's (its
    /// poll timeout), which this actor runs on: a quiet link wakes one thread per ping, where a sleeping task woke the
    /// alarm clock's thread and then the loop's.
    func keepAlive(generation: Int) {
        guard let link, link.generation == generation else { return }
        let next: ContinuousClock.Instant
        switch machine.keepAlive(
            at: .now, lastSend: link.lastSend, lastReceive: link.lastReceive, heldBack: link.heldBack)
        {
        case .serverTimedOut:
            logger.warning("Server timeout elapsed without receiving a message from the server.")
            self.link?.endReason = HubConnectionError(
                .serverTimeout, "Server timeout elapsed without receiving a message from the server.")
            Task(executorPreference: loop.taskExecutor) { await link.transport.close() }
            return
        case .ping(let at):
            try? write(.ping)
            next = at
        case .wait(let until):
            next = until
        }
        self.link?.keepAliveTimer = loop.schedule(after: next - .now) { [weak self] in
            // The loop runs its timers on its own thread, this actor's executor.
            self?.assumeIsolated { $0.keepAlive(generation: generation) }
        }
    }

    // MARK: - The link ends

    func linkEnded(generation: Int, error: HubConnectionError?) async {
        guard let current = link, current.generation == generation else { return }
        if let timer = current.keepAliveTimer { loop.cancel(timer) }
        current.receiveTask?.cancel()
        link = nil
        // What is to be said is said now (subscribers hear of the loss before any retry); the retries run apart.
        guard let (mode, pause) = (try? perform(machine.linkEnded(error, stateful: stateful != nil, at: .now))) ?? nil
        else { return }
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
        stopAuthenticationRefresh()
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
        let transport = try await open(.webSockets, target)
        let leftover = try await handshake(transport, version: 2)
        let (sequenceId, replay) = stateful!.beginReattach()
        try attach(
            transport, leftover: leftover,
            first: [options.hubProtocol.encode(.sequence(sequenceId: sequenceId))] + replay)
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
