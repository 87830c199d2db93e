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

/// A client connection to a SignalR hub: JSON or MessagePack, over WebSockets, Server-Sent Events or Long Polling.
///
/// The connection runs on the thread of its `WebSocketLoop` (the actor's executor is the loop): a frame is read,
/// decoded and handed to its event buffer by the thread that received it. Handlers run one at a time in arrival
/// order, off that thread: a handler may `invoke` on the same connection and await the result without deadlock.
/// Handlers registered before `start()` see the first message.
public actor HubConnection {
    public typealias Handler = @Sendable (HubArguments) async throws -> JSONValue?

    public nonisolated let url: URL
    /// The thread this actor runs on, which also serves its WebSockets.
    nonisolated let loop: WebSocketLoop
    public nonisolated var unownedExecutor: UnownedSerialExecutor { loop.asUnownedSerialExecutor() }
    /// The connection's thread as a task executor (SE-0417), for a consumer of its event buffer that does little per
    /// event (counts, forwards): `Task(executorPreference: connection.taskExecutor) { ... }`. The thread that decoded
    /// the events then resumes it too, so a frame wakes one thread, not two. Such a consumer must not block: while it
    /// runs, the connection reads nothing and sends no ping. One that waits on a disk (a database writer) belongs on
    /// a thread of its own. Once the connection is gone, the tasks that prefer it run on the global pool.
    public nonisolated var taskExecutor: any TaskExecutor { loop.taskExecutor }
    let options: HubConnectionOptions
    let logger: Logger

    var handlers: [String: [Handler]] = [:]
    /// Targets whose invocations go, decoded in one pass, to a bounded buffer (`on(_:into:)`).
    var routes = RouteTable()
    /// Events decoded and not yet handed to their buffers.
    var stagedEvents = 0
    static let handOverEvery = 256
    /// Where the connection is in its life; every decision about it is the state machine's.
    var machine: ConnectionStateMachine
    public var state: HubConnectionState { machine.phase }
    public internal(set) var connectionId: String?
    var link: Link?
    var linkGeneration = 0
    var pending: [String: Pending] = [:]
    var nextInvocationId = 1
    var subscribers: [Int: AsyncStream<HubConnectionEvent>.Continuation] = [:]
    var nextSubscriber = 0
    var cachedToken: String?
    /// The retry loop after a lost link (the first start runs it in `start()` itself).
    var reconnectTask: Task<Void, Never>?
    /// The pause before the next attempt, while one runs (`stop` ends it).
    var pauseTask: Task<Void, Never>?
    /// Stateful reconnect: sequencing and replay buffer, and where to re-attach, while it is in use.
    var stateful: StatefulReconnectBuffer?
    /// The negotiated connection a re-attach opens again (WebSockets only).
    var reattachTarget: Negotiated?
    var ackTask: Task<Void, Never>?
    /// Authentication refresh: where (`{hub}/refresh?id=`) and the timer of the next one, while the server offers it.
    var refreshTarget: URL?
    /// The token the live HTTP transport's polls and sends carry, which a refresh replaces.
    var bearerInUse: BearerToken?
    var authRefreshTask: Task<Void, Never>?
    /// When the token in use expires, as the server last reported its lifetime (a failed refresh is retried before).
    var tokenExpiry: ContinuousClock.Instant?
    var sendSpaceWaiters: [CheckedContinuation<Void, Never>] = []
    let jobs: AsyncStream<@Sendable () async -> Void>.Continuation
    /// The handler jobs of the frame being processed, handed to the dispatcher together at its end: one hand-over
    /// per frame rather than per message (a server batches messages into frames under load).
    var frameJobs: [@Sendable () async -> Void] = []
    let dispatcher: Task<Void, Never>
    /// Unexpected messages are warned about once per kind, then logged at debug level: a chatty or hostile
    /// server must not flood the journal (10,000 invocations nobody handles are one warning, not 10,000).
    var warnedAbout: Set<String> = []

    /// The transport in use while connected.
    public var transport: TransportKind? { link?.transport.kind }
    public nonisolated var hubProtocol: HubProtocolKind { options.hubProtocol }

    /// One open transport with its handshake done.
    struct Link {
        let transport: any HubTransport
        let generation: Int
        let since = ContinuousClock.now
        var lastSend = ContinuousClock.now
        var lastReceive = ContinuousClock.now
        /// The receive loop waits for room in an event buffer: the server is sending, we are not reading.
        var heldBack = false
        var receiveTask: Task<Void, Never>?
        /// The loop's timer for the next keep-alive look.
        var keepAliveTimer: WebSocketLoop.TimerID?
        /// Set when the server's Close message or a protocol error explains the end of the link.
        var endReason: HubConnectionError?
    }

    enum Pending {
        case invocation(target: String, CheckedContinuation<JSONValue?, any Error>)
        case stream(target: String, AsyncThrowingStream<JSONValue, any Error>.Continuation)
    }

    public init(url: URL, options: HubConnectionOptions = .init(), logger: Logger = Logger(label: "signalr")) {
        self.url = url
        self.options = options
        self.logger = logger
        loop = WebSocketLoop(
            name: "signalr-\(url.port ?? (url.scheme == "https" ? 443 : 80))", caFile: options.webSocket.caFile,
            connectTimeout: options.webSocket.connectTimeout, proxy: options.webSocket.proxy.proxy(for: url))
        machine = ConnectionStateMachine(
            policies: .init(
                start: options.startRetryPolicy, reconnect: options.reconnectPolicy,
                stableLinkAfter: options.stableLinkAfter,
                shortLinkBackoff: options.shortLinkBackoff, keepAliveInterval: options.keepAliveInterval,
                serverTimeout: options.serverTimeout))
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
        routes.remove(target)
    }

    /// Decodes the invocations of `decoder.targets` into events and appends them to `buffer`, in order, the frames
    /// read together at a time (at most about 256 events). While the buffer is full the connection stops reading the socket, so the server is held
    /// back by TCP instead of growing memory here; keep-alive pings still go out, and the server timeout does not
    /// count the time held. Events go straight from the frame's bytes (no `JSONValue` tree) when
    /// `decoder.read` knows their form. Handlers registered with `on` for these targets are not called.
    public func on<Event: Sendable>(_ decoder: HubEventDecoder<Event>, into buffer: HubEventBuffer<Event>) {
        routes.add(Route(decoder: decoder, buffer: buffer), for: decoder.targets)
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

    func unsubscribe(_ id: Int) { subscribers[id] = nil }

    func emit(_ event: HubConnectionEvent) {
        for c in subscribers.values { c.yield(event) }
    }
}
