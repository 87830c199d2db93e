import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import Synchronization

/// A real HTTP receiver on 127.0.0.1 and a free port, standing in for Slack, Discord, a webhook endpoint...
/// It records every request and answers as `respond` says (200 by default).
public final class WebhookReceiver: Sendable {
    public struct Received: Sendable {
        public let method: String
        public let path: String
        public let query: String
        /// Names in lower case.
        public let headers: [String: String]
        public let body: [UInt8]
        public var text: String { String(decoding: body, as: UTF8.self) }
    }

    public struct Answer: Sendable {
        public var status: Int
        public var headers: [String: String]
        public var body: String
        /// Answer this late (a slow destination).
        public var delay: Duration
        public init(_ status: Int = 200, headers: [String: String] = [:], body: String = "", delay: Duration = .zero) {
            self.status = status
            self.headers = headers
            self.body = body
            self.delay = delay
        }
    }

    private let log = Mutex<[(Received, ContinuousClock.Instant)]>([])
    /// The status of each answer actually sent, in the order they went out.
    private let answered = Mutex<[(Received, Int)]>([])
    private let responder: Mutex<Responder>

    /// `respond` gets each request and how many came before it.
    public init(respond: @escaping @Sendable (Received, Int) -> Answer = { _, _ in Answer() }) {
        responder = Mutex(Responder(respond))
    }

    public var received: [Received] { log.withLock { $0.map(\.0) } }
    /// The requests answered with a 2xx: what the sender was told was delivered.
    public var acknowledged: [Received] { answered.withLock { $0.filter { (200..<300).contains($0.1) }.map(\.0) } }

    /// When each request arrived.
    public var arrivals: [ContinuousClock.Instant] { log.withLock { $0.map(\.1) } }

    public func respond(_ r: @escaping @Sendable (Received, Int) -> Answer) {
        let box = Responder(r)
        responder.withLock { $0 = box }
    }

    /// Boxed: a closure stored directly in a Mutex gains reabstraction thunks at each `withLock`.
    final class Responder: Sendable {
        let answer: @Sendable (Received, Int) -> Answer
        init(_ answer: @escaping @Sendable (Received, Int) -> Answer) { self.answer = answer }
    }

    /// Runs for the length of `body`, which gets the base URL (`http://127.0.0.1:PORT`). `port` 0 picks a free one.
    public func run(port: Int = 0, _ body: (URL) async throws -> Void) async throws {
        let router = Router()
        router.add(middleware: Recorder(receiver: self))
        var logger = Logger(label: "receiver")
        logger.logLevel = .critical
        let (stream, continuation) = AsyncStream<Int>.makeStream()
        let app = Application(
            router: router, configuration: .init(address: .hostname("127.0.0.1", port: port), serverName: "receiver"),
            onServerRunning: { channel in continuation.yield(channel.localAddress?.port ?? 0) }, logger: logger)
        try await withThrowingTaskGroup(of: Void.self) { group in
            // No signals trapped (Hummingbird's default is SIGTERM and SIGINT): each trap is a libdispatch signal
            // source, made and torn down with every server while the suites run side by side, and libdispatch's
            // epoll bookkeeping on Linux crashed CI runs in `_dispatch_event_loop_drain`. No test server traps any.
            group.addTask { try await app.runService(gracefulShutdownSignals: []) }
            var it = stream.makeAsyncIterator()
            guard let port = await it.next() else { throw HarnessError("the receiver did not start") }
            defer { group.cancelAll() }
            try await body(URL(string: "http://127.0.0.1:\(port)")!)
        }
    }

    fileprivate func handle(_ request: Request) async throws -> Response {
        let bytes = try await request.body.collect(upTo: 10 << 20)
        var headers: [String: String] = [:]
        // HTTP names are case-insensitive
        for h in request.headers { headers[h.name.canonicalName.lowercased()] = h.value }
        let r = Received(
            method: request.method.rawValue, path: request.uri.path, query: request.uri.query ?? "", headers: headers,
            body: Array(bytes.readableBytesView))
        let index = log.withLock { l in
            l.append((r, .now))
            return l.count - 1
        }
        let answer = responder.withLock { $0 }.answer(r, index)
        if answer.delay > .zero { try await Task.sleep(for: answer.delay) }
        answered.withLock { $0.append((r, answer.status)) }
        var out = HTTPFields()
        for (k, v) in answer.headers { if let name = HTTPField.Name(k) { out[name] = v } }
        return Response(
            status: .init(code: answer.status), headers: out, body: .init(byteBuffer: ByteBuffer(string: answer.body)))
    }
}

private struct Recorder: RouterMiddleware {
    let receiver: WebhookReceiver
    func handle(
        _ request: Request, context: BasicRequestContext, next: (Request, BasicRequestContext) async throws -> Response
    ) async throws -> Response {
        try await receiver.handle(request)
    }
}
