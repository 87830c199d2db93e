import Foundation
import HTTPTransport
import Logging
import SignalRProtocol
import WebSocketTransport

public enum HubConnectionState: String, Sendable {
    case disconnected, connecting, connected, reconnecting, disconnecting
}

/// What happens to a connection over its life, for whoever watches `events()`.
public enum HubConnectionEvent: Sendable, Equatable {
    case connected(connectionId: String?)
    /// The link was lost; the reconnect policy is trying again.
    case reconnecting(reason: String)
    /// A new connection is up (new negotiate, new connection id): messages sent meanwhile were lost.
    case reconnected(connectionId: String?)
    /// Final. `error` is nil after `stop()`; its kind says why (`.unauthorized`: the token was refused).
    case closed(error: HubConnectionError?)
}

/// A client connection to a SignalR hub over WebSockets with the JSON protocol.
///
/// The connection runs on the thread of its `WebSocketLoop` (the actor's executor is the loop): a frame is read,
/// decoded and handed to its event buffer by the thread that received it. Handlers run one at a time in arrival
/// order, off that thread: a handler may `invoke` on the same connection and await the result without deadlock.
/// Handlers registered before `start()` see the first message.
public actor HubConnection {
    public typealias Handler = @Sendable (HubArguments) async throws -> JSONValue?

    public nonisolated let url: URL
    /// The thread this actor runs on, which also serves its WebSockets.
    private nonisolated let loop: WebSocketLoop
    public nonisolated var unownedExecutor: UnownedSerialExecutor { loop.asUnownedSerialExecutor() }
    private let options: HubConnectionOptions
    private let logger: Logger

    private var handlers: [String: [Handler]] = [:]
    /// Targets whose invocations go, decoded in one pass, to a bounded buffer (`on(_:into:)`), by lower-cased name;
    /// `routeByName` finds them by the name as the server spells it without lower-casing each time.
    private var routes: [String: any EventRoute] = [:]
    private var routeByName: [String: any EventRoute] = [:]
    /// Each route once (a route serves several targets).
    private var routeList: [any EventRoute] = []
    /// Events decoded and not yet handed to their buffers.
    private var stagedEvents = 0
    static let handOverEvery = 256
    /// Where the connection is in its life; every decision about it is the state machine's.
    private var machine: ConnectionStateMachine
    public var state: HubConnectionState { machine.phase }
    public private(set) var connectionId: String?
    private var link: Link?
    private var linkGeneration = 0
    private var pending: [String: Pending] = [:]
    private var nextInvocationId = 1
    private var subscribers: [Int: AsyncStream<HubConnectionEvent>.Continuation] = [:]
    private var nextSubscriber = 0
    private var cachedToken: String?
    /// The retry loop after a lost link (the first start runs it in `start()` itself).
    private var reconnectTask: Task<Void, Never>?
    /// Stateful reconnect: sequencing and replay buffer, and where to re-attach, while it is in use.
    private var stateful: StatefulReconnectBuffer?
    private var reattachTarget: (url: URL, options: WebSocketOptions)?
    private var ackTask: Task<Void, Never>?
    private var sendSpaceWaiters: [CheckedContinuation<Void, Never>] = []
    private let jobs: AsyncStream<@Sendable () async -> Void>.Continuation
    /// The handler jobs of the frame being processed, handed to the dispatcher together at its end: one hand-over
    /// per frame rather than per message (a server batches messages into frames under load).
    private var frameJobs: [@Sendable () async -> Void] = []
    private let dispatcher: Task<Void, Never>
    /// Unexpected messages are warned about once per kind, then logged at debug level: a chatty or hostile
    /// server must not flood the journal (10,000 invocations nobody handles are one warning, not 10,000).
    private var warnedAbout: Set<String> = []

    /// One open WebSocket with its handshake done.
    private struct Link {
        let socket: WebSocket
        let generation: Int
        let since = ContinuousClock.now
        var lastSend = ContinuousClock.now
        var lastReceive = ContinuousClock.now
        /// The receive loop waits for room in an event buffer: the server is sending, we are not reading.
        var heldBack = false
        var receiveTask: Task<Void, Never>?
        var keepAliveTask: Task<Void, Never>?
        /// Set when the server's Close message or a protocol error explains the end of the link.
        var endReason: HubConnectionError?
    }

    private enum Pending {
        case invocation(target: String, CheckedContinuation<JSONValue?, any Error>)
        case stream(target: String, AsyncThrowingStream<JSONValue, any Error>.Continuation)
    }

    public init(url: URL, options: HubConnectionOptions = .init(), logger: Logger = Logger(label: "signalr")) {
        self.url = url
        self.options = options
        self.logger = logger
        loop = WebSocketLoop(
            name: "signalr-\(url.port ?? (url.scheme == "https" ? 443 : 80))", caFile: options.webSocket.caFile,
            connectTimeout: options.webSocket.connectTimeout)
        machine = ConnectionStateMachine(
            policies: .init(
                start: options.startRetryPolicy, reconnect: options.reconnectPolicy, stableLinkAfter: options.stableLinkAfter,
                shortLinkBackoff: options.shortLinkBackoff))
        let (stream, continuation) = AsyncStream<@Sendable () async -> Void>.makeStream()
        self.jobs = continuation
        // Handlers run here, one after another, never on the receive loop.
        self.dispatcher = Task {
            for await job in stream { await job() }
        }
    }

    deinit {
        jobs.finish()
        reconnectTask?.cancel()
        loop.shutdown()
    }

    // MARK: - Handlers

    /// Registers a handler for invocations of `target` (case-insensitive, as the official clients).
    public func on(_ target: String, _ handler: @escaping @Sendable (HubArguments) async throws -> Void) {
        onResult(target) { (args: HubArguments) async throws -> JSONValue? in
            try await handler(args)
            return nil
        }
    }

    /// Registers a handler that can answer a client-result invocation (one the server sends with an
    /// invocation id and awaits). Return nil to give no result.
    public func onResult(_ target: String, _ handler: @escaping Handler) {
        handlers[target.lowercased(), default: []].append(handler)
    }

    public func off(_ target: String) {
        handlers[target.lowercased()] = nil
        routes[target.lowercased()] = nil
        routeByName = [:]
        routeList.removeAll { route in !routes.values.contains { $0 === route } }
    }

    /// Decodes the invocations of `decoder.targets` into events and appends them to `buffer`, in order, the frames
    /// read together at a time (at most about 256 events). While the buffer is full the connection stops reading the socket, so the server is held
    /// back by TCP instead of growing memory here; keep-alive pings still go out, and the server timeout does not
    /// count the time held. Events go straight from the frame's bytes (no `JSONValue` tree) when
    /// `decoder.read` knows their form. Handlers registered with `on` for these targets are not called.
    public func on<Event: Sendable>(_ decoder: HubEventDecoder<Event>, into buffer: HubEventBuffer<Event>) {
        let route = Route(decoder: decoder, buffer: buffer)
        for target in decoder.targets { routes[target.lowercased()] = route }
        routeByName = [:]
        routeList.removeAll { route in !routes.values.contains { $0 === route } }
        routeList.append(route)
    }

    private func route(for target: String) -> (any EventRoute)? {
        if let known = routeByName[target] { return known }
        guard let found = routes[target.lowercased()] else { return nil }
        if routeByName.count < 64 { routeByName[target] = found }  // a bounded memo: the server chooses the spelling
        return found
    }

    /// A new subscription to state events; it ends when the connection is closed for good.
    public func events() -> AsyncStream<HubConnectionEvent> {
        let (stream, continuation) = AsyncStream<HubConnectionEvent>.makeStream()
        let id = nextSubscriber
        nextSubscriber += 1
        subscribers[id] = continuation
        continuation.onTermination = { [weak self] _ in
            Task { await self?.unsubscribe(id) }
        }
        return stream
    }

    private func unsubscribe(_ id: Int) { subscribers[id] = nil }

    private func emit(_ event: HubConnectionEvent) {
        for c in subscribers.values { c.yield(event) }
    }

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
    private func drive(_ first: [ConnectionStateMachine.Action], fromStart: Bool) async throws(HubConnectionError) {
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
    private func perform(_ actions: [ConnectionStateMachine.Action]) throws(HubConnectionError) -> (ConnectionStateMachine.Mode, Duration)? {
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

    private func token(fresh: Bool) async throws(HubConnectionError) -> String? {
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
    private func connect() async throws(HubConnectionError) {
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

    private func openSocket(_ url: URL, _ wsOptions: WebSocketOptions) async throws(HubConnectionError) -> WebSocket {
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
    private func attach(_ socket: WebSocket, leftover: [UInt8], first: [[UInt8]] = []) throws(HubConnectionError) {
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
    private func handshake(_ socket: WebSocket, version: Int) async throws(HubConnectionError) -> [UInt8] {
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

    // MARK: - Receiving

    private func receiveLoop(_ socket: WebSocket, generation: Int) async {
        var failure: HubConnectionError?
        await flushRoutes(generation: generation)  // what came with the handshake answer
        do {
            // The frames waiting are taken together, and their events handed over together: one wake-up of the
            // consumer per batch, not per frame, when the server sends faster than one frame at a time is read.
            // A long backlog is handed over every `handOverEvery` events, so a buffer is passed by at most that.
            // Events that end with one the server follows at once (a route's `followerWait`) are held for the next
            // frame, up to that wait: the pair is one hand-over.
            var hold: Duration?
            reading: while let frames = try await socket.messages.nextBatch(within: hold) {
                for frame in frames {
                    let goOn = process(frame: frame.bytes, generation: generation)
                    if !goOn || stagedEvents >= Self.handOverEvery { await flushRoutes(generation: generation) }
                    if !goOn { break reading }  // what came before the end was handed over
                }
                hold = frames.isEmpty ? nil : routeList.lazy.compactMap(\.followerWait).max()
                // Frames already in the socket are read first: a fast reader would otherwise wake its consumer for
                // every frame or two (the `handOverEvery` bound still applies).
                if hold == nil && !socket.hasUnreadInput { await flushRoutes(generation: generation) }
            }
        } catch {
            failure = HubConnectionError(.transport(error.kind), error.message)
        }
        await flushRoutes(generation: generation)  // an event held for a follower that did not come
        let end = link?.generation == generation ? link?.endReason : nil
        if failure == nil && end == nil && machine.state != .disconnecting {
            let info = socket.closeInfo.map { " (\($0))" } ?? ""
            failure = HubConnectionError(.transport(.connectionLost), "The server closed the WebSocket\(info).")
        }
        await socket.close()
        await linkEnded(generation: generation, error: end ?? failure)
    }

    /// Handles one WebSocket message (one or more hub messages). Returns false when the link must end.
    @discardableResult
    private func process(frame bytes: [UInt8], generation: Int) -> Bool {
        guard link == nil || link?.generation == generation else { return false }
        link?.lastReceive = .now
        defer { flushFrameJobs() }
        let (pieces, incomplete) = TextMessageFormat.split(bytes)
        var protocolError: String?
        for piece in pieces {
            if !routes.isEmpty, let route = readRouted(piece) {
                if acceptSequenced() {
                    route.commit()
                    stagedEvents += 1
                }
                continue
            }
            do {
                guard let message = try JSONHubProtocol.decode(piece) else {
                    // Ignored, as the protocol asks (a newer server), but said once: it may also be a broken one.
                    warnOnce("unknownType", "ignored a message of a type this client does not know (a newer server?)")
                    continue
                }
                if !handle(message) { return false }
            } catch {
                // One bad message does not cost the others of its frame; the link ends after them.
                logger.error("protocol error from the server: \(error)")
                protocolError = protocolError ?? error.message
            }
        }
        if incomplete && !bytes.isEmpty {
            logger.error("protocol error from the server: a message without its 0x1E terminator")
            protocolError = protocolError ?? "Message is incomplete."
        }
        if let protocolError {
            link?.endReason = HubConnectionError(.protocolError, "The server broke the hub protocol: \(protocolError)")
            return false
        }
        return true
    }

    /// An invocation of a routed target in the common form, read in one pass; the route holds its event until
    /// `commit`. nil: anything else (decoded by `JSONHubProtocol.decode`).
    private func readRouted(_ piece: ArraySlice<UInt8>) -> (any EventRoute)? {
        piece.withUnsafeBufferPointer { bytes in
            JSONHubProtocol.decodeInvocation(bytes) { target, reader -> (any EventRoute)? in
                guard let route = route(for: target), route.read(target, &reader) else { return nil }
                return route
            }
        }
    }

    /// Under stateful reconnect, counts a sequenced message in; false when it must be dropped (a replay of one
    /// already processed, or one before the peer's Sequence).
    private func acceptSequenced() -> Bool {
        guard var buffer = stateful else { return true }
        let verdict = buffer.received()
        stateful = buffer
        switch verdict {
        case .duplicate:
            logger.debug("dropped a replayed message already processed")
            return false
        case .ignoredUntilSequence:
            return false
        case .process:
            scheduleAck()
            return true
        }
    }

    /// Hands the events the routes gathered from a frame to their buffers, waiting while a buffer is full (the
    /// socket is not read meanwhile: back-pressure).
    private func flushRoutes(generation: Int) async {
        guard !routes.isEmpty else { return }
        stagedEvents = 0
        for route in routeList where route.hasStaged {
            if link?.generation == generation { link?.heldBack = true }
            await route.handOver(isolation: #isolation)
            if link?.generation == generation {
                link?.heldBack = false
                link?.lastReceive = .now
            }
        }
    }

    /// Returns false when the link must end (the server sent Close).
    private func handle(_ message: HubMessage) -> Bool {
        if message.isSequenced, !acceptSequenced() { return true }
        switch message {
        case .invocation(let inv):
            if let route = route(for: inv.target) {
                route.decode(inv.target, HubArguments(target: inv.target, values: inv.arguments))
                stagedEvents += 1
                if let id = inv.invocationId { sendCompletion(id, .error("Client didn't provide a result.")) }
                return true
            }
            dispatch(inv)
        case .streamItem(let item):
            guard case .stream(_, let c) = pending[item.invocationId] else {
                warnOnce("streamItem", "dropped a StreamItem for unknown invocation '\(item.invocationId)'")
                return true
            }
            c.yield(item.item)
        case .completion(let completion):
            guard let entry = pending.removeValue(forKey: completion.invocationId) else {
                warnOnce("completion", "dropped a Completion for unknown invocation '\(completion.invocationId)'")
                return true
            }
            switch (entry, completion.outcome) {
            case (.invocation(_, let c), .void): c.resume(returning: nil)
            case (.invocation(_, let c), .result(let v)): c.resume(returning: v)
            case (.invocation(let target, let c), .error(let e)): c.resume(throwing: HubInvocationError(target: target, message: e))
            case (.stream(_, let c), .error(let e)): c.finish(throwing: HubInvocationError(target: "stream", message: e))
            case (.stream(_, let c), _): c.finish()
            }
        case .ping:
            break
        case .close(let close):
            let reason =
                close.error.map { "Server returned an error on close: \($0)" } ?? "The server closed the connection."
            link?.endReason = HubConnectionError(.closedByServer(allowReconnect: close.allowReconnect), reason)
            return false
        case .streamInvocation, .cancelInvocation:
            logger.warning("ignored a client-bound stream request: this client does not serve streams")
        case .ack(let id):
            stateful?.acknowledged(upTo: id)
            let waiters = sendSpaceWaiters
            sendSpaceWaiters = []
            waiters.forEach { $0.resume() }
        case .sequence(let id):
            guard stateful != nil else {
                logger.debug("ignored a Sequence message: stateful reconnect was not negotiated")
                return true
            }
            do {
                try stateful?.peerSequence(id)
            } catch {
                link?.endReason = error
                return false
            }
        }
        return true
    }

    /// The first of each kind (of at most 32 kinds) is a warning; the rest are debug lines.
    private func warnOnce(_ kind: String, _ message: @autoclosure () -> String) {
        if warnedAbout.count < 32, warnedAbout.insert(kind).inserted {
            logger.warning("\(message()) (more of these are logged at debug level)")
        } else {
            logger.debug("\(message())")
        }
    }

    /// Queues the handlers of one invocation on the dispatcher; answers client-result invocations.
    private func dispatch(_ inv: HubMessage.Invocation) {
        let list = handlers[inv.target.lowercased()] ?? []
        let args = HubArguments(target: inv.target, values: inv.arguments)
        let logger = self.logger
        if list.isEmpty {
            warnOnce("target:" + inv.target.lowercased(), "no handler for '\(inv.target)'")
            if let id = inv.invocationId { sendCompletion(id, .error("Client didn't provide a result.")) }
            return
        }
        frameJobs.append { [weak self] in
            var results: [JSONValue] = []
            var failure: String?
            for handler in list {
                do {
                    if let r = try await handler(args) { results.append(r) }
                } catch {
                    logger.error("handler for '\(inv.target)' failed: \(error)")
                    failure = failure ?? "\(error)"
                }
            }
            guard let id = inv.invocationId else { return }
            let outcome: HubMessage.Completion.Outcome =
                if let failure { .error(failure) } else if results.count > 1 { .error("Client provided multiple results.") } else if let r = results.first {
                    .result(r)
                } else { .error("Client didn't provide a result.") }
            await self?.sendCompletion(id, outcome)
        }
    }

    /// Hands the frame's handler jobs to the dispatcher, in order, as one job.
    private func flushFrameJobs() {
        guard !frameJobs.isEmpty else { return }
        let batch = frameJobs
        frameJobs = []
        if batch.count == 1 {
            jobs.yield(batch[0])
        } else {
            jobs.yield {
                for job in batch { await job() }
            }
        }
    }

    private func sendCompletion(_ id: String, _ outcome: HubMessage.Completion.Outcome) {
        try? write(.completion(.init(invocationId: id, outcome: outcome)))
    }

    // MARK: - Keep-alive and server timeout

    private func keepAliveLoop(generation: Int) async {
        while !Task.isCancelled {
            guard let link, link.generation == generation else { return }
            let now = ContinuousClock.now
            if !link.heldBack && now - link.lastReceive >= options.serverTimeout {
                logger.warning("Server timeout elapsed without receiving a message from the server.")
                self.link?.endReason = HubConnectionError(
                    .serverTimeout, "Server timeout elapsed without receiving a message from the server.")
                await link.socket.close(code: 1000, reason: "server timeout")
                return
            }
            if now - link.lastSend >= options.keepAliveInterval {
                try? write(.ping)
            }
            let lastSend = self.link?.lastSend ?? now
            let nextPing = lastSend + options.keepAliveInterval
            let nextTimeout = (link.heldBack ? now : link.lastReceive) + options.serverTimeout
            try? await Task.sleep(until: min(nextPing, nextTimeout), clock: .continuous)
        }
    }

    // MARK: - The link ends

    private func linkEnded(generation: Int, error: HubConnectionError?) async {
        guard let current = link, current.generation == generation else { return }
        current.keepAliveTask?.cancel()
        current.receiveTask?.cancel()
        link = nil
        // What is to be said is said now (subscribers hear of the loss before any retry); the retries run apart.
        guard let (mode, pause) = (try? perform(machine.linkEnded(error, stateful: stateful != nil, at: .now))) ?? nil else { return }
        reconnectTask = Task { [weak self] in try? await self?.drive([.attempt(mode, after: pause)], fromStart: false) }
    }

    /// Forgets everything tied to the logical connection: pending invocations fail, sequencing ends.
    private func dropConnectionState() {
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
    private func reattach() async throws(HubConnectionError) {
        guard let target = reattachTarget, stateful != nil else {
            throw HubConnectionError(.invalidState, "Nothing to re-attach.")
        }
        let socket = try await openSocket(target.url, target.options)
        let leftover = try await handshake(socket, version: 2)
        let (sequenceId, replay) = stateful!.beginReattach()
        try attach(socket, leftover: leftover, first: [JSONHubProtocol.encode(.sequence(sequenceId: sequenceId))] + replay)
    }

    /// Acks are coalesced: one about a second after the first unacknowledged receipt.
    private func scheduleAck() {
        guard ackTask == nil else { return }
        ackTask = Task { [weak self] in
            try? await Task.sleep(for: .seconds(1))
            await self?.sendAck()
        }
    }

    private func sendAck() {
        ackTask = nil
        guard let id = stateful?.lastReceived, id > 0 else { return }
        try? write(.ack(sequenceId: id))
    }

    /// With stateful reconnect, a full replay buffer makes senders wait for the peer's Acks.
    private func waitForSendSpace() async {
        while stateful?.isFull == true {
            await withCheckedContinuation { sendSpaceWaiters.append($0) }
        }
    }

    // MARK: - Sending

    private func write(_ message: HubMessage) throws(HubConnectionError) {
        let bytes = JSONHubProtocol.encode(message)
        // Under stateful reconnect a tracked message is kept for replay, so it is not lost with the socket.
        let kept = stateful != nil && message.isSequenced
        if kept { stateful?.sent(bytes) }
        guard let link else {
            if kept { return }
            throw HubConnectionError(.invalidState, "The connection is \(state.rawValue); nothing can be sent.")
        }
        do {
            try link.socket.send(.text(bytes))
        } catch {
            if kept { return }
            throw HubConnectionError(.transport(error.kind), error.message)
        }
        self.link?.lastSend = .now
    }

    private func newInvocationId() -> String {
        defer { nextInvocationId += 1 }
        return String(nextInvocationId)
    }

    /// Calls a hub method and waits for its Completion. Returns the result, or nil for a void method.
    public func invoke(_ target: String, _ arguments: [JSONValue] = []) async throws -> JSONValue? {
        await waitForSendSpace()
        let id = newInvocationId()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (c: CheckedContinuation<JSONValue?, any Error>) in
                do {
                    try write(.invocation(.init(invocationId: id, target: target, arguments: arguments)))
                    pending[id] = .invocation(target: target, c)
                } catch {
                    c.resume(throwing: error)
                }
            }
        } onCancel: {
            Task { await self.cancelInvocation(id) }
        }
    }

    /// Calls a hub method and decodes its result as `T`.
    public func invoke<T: Decodable & Sendable>(_ target: String, _ arguments: [JSONValue] = [], returning: T.Type) async throws -> T {
        let value = try await invoke(target, arguments) ?? .null
        return try HubArguments(target: target, values: [value]).decode(0, as: T.self)
    }

    /// Sends an invocation without waiting for (or getting) a Completion.
    public func send(_ target: String, _ arguments: [JSONValue] = []) async throws(HubConnectionError) {
        await waitForSendSpace()
        try write(.invocation(.init(target: target, arguments: arguments)))
    }

    /// Starts a server-to-client stream. Ending the iteration early sends CancelInvocation.
    public func stream(_ target: String, _ arguments: [JSONValue] = []) -> AsyncThrowingStream<JSONValue, any Error> {
        let id = newInvocationId()
        let (stream, continuation) = AsyncThrowingStream<JSONValue, any Error>.makeStream()
        do {
            try write(.streamInvocation(.init(invocationId: id, target: target, arguments: arguments)))
            pending[id] = .stream(target: target, continuation)
            continuation.onTermination = { [weak self] reason in
                if case .cancelled = reason { Task { await self?.cancelStream(id) } }
            }
        } catch {
            continuation.finish(throwing: error)
        }
        return stream
    }

    private func cancelStream(_ id: String) {
        guard pending.removeValue(forKey: id) != nil else { return }
        try? write(.cancelInvocation(invocationId: id))
    }

    private func cancelInvocation(_ id: String) {
        if case .invocation(_, let c) = pending.removeValue(forKey: id) { c.resume(throwing: CancellationError()) }
    }
}

/// A route from invocations to one event buffer (type-erased, for the connection's table).
private protocol EventRoute: AnyObject {
    /// Reads the arguments in one pass into a candidate event; false when not in the common form.
    func read(_ target: String, _ reader: inout JSONReader) -> Bool
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

private final class Route<Event: Sendable>: EventRoute {
    let decoder: HubEventDecoder<Event>
    let buffer: HubEventBuffer<Event>
    /// Events kept for the buffer, and after them at most one candidate (`hasCandidate`), read but not yet kept:
    /// its message may still prove not to be in the common form, or be a replay. The candidate sits in `staged`
    /// rather than in an `Event?`: this class is generic, and each use of an `Event?` looked up its metadata at
    /// run time. A candidate not kept is forgotten by whatever comes next.
    private var staged: [Event] = []
    private var hasCandidate = false

    private func forgetCandidate() {
        if hasCandidate { staged.removeLast() }
        hasCandidate = false
    }

    init(decoder: HubEventDecoder<Event>, buffer: HubEventBuffer<Event>) {
        self.decoder = decoder
        self.buffer = buffer
    }

    func read(_ target: String, _ reader: inout JSONReader) -> Bool {
        forgetCandidate()
        guard let event = decoder.read(target, &reader) else { return false }
        staged.append(event)
        hasCandidate = true
        return true
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
