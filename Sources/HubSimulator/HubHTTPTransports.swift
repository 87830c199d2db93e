import Foundation
import Hummingbird
import NIOCore
import Synchronization

/// Server-Sent Events and Long Polling at `/hubs/family?id=<connectionToken>` (TransportProtocols.md), written apart
/// from the client's transports: `GET` with `Accept: text/event-stream` opens the event stream; any other `GET` is a
/// poll (the first answers at once); `POST` carries what the client sends; `DELETE` ends a Long Polling connection.
extension HubSimulator {
    func httpTransportRoutes(_ router: Router<BasicRequestContext>) {
        router.get("hubs/family") { request, _ in
            guard self.hubAllows(request) else { return self.problem(401, "A valid bearer token is required.") }
            guard let id = request.uri.queryParameters["id"].map(String.init) else {
                return self.problem(400, "Connection ID required")
            }
            if request.headers[.accept]?.contains("text/event-stream") == true {
                return await self.openEventStream(id, bearer: self.bearer(request))
            }
            return await self.poll(id, bearer: self.bearer(request))
        }
        router.post("hubs/family") { request, _ in
            guard self.hubAllows(request) else { return self.problem(401, "A valid bearer token is required.") }
            guard let id = request.uri.queryParameters["id"].map(String.init) else {
                return self.problem(400, "Connection ID required")
            }
            // ASP.NET Core takes sends before the first poll too (the connection exists since negotiate): some
            // clients send their handshake first.
            var link = self.httpLinks.withLock { $0[id] }
            if link == nil { link = await self.startLongPolling(id, bearer: self.bearer(request)) }
            guard let link else { return self.problem(404, "No Connection with that ID") }
            var body = try await request.body.collect(upTo: 1 << 20)
            let bytes = body.readBytes(length: body.readableBytes) ?? []
            if !(await link.session.receive(bytes)) { link.client.endSocket(generation: link.generation) }
            return Response(status: .ok)
        }
        router.delete("hubs/family") { request, _ in
            guard let id = request.uri.queryParameters["id"].map(String.init),
                let link = self.httpLinks.withLock({ $0[id] })
            else {
                return self.problem(404, "No Connection with that ID")
            }
            guard link.transport == "LongPolling" else {
                return self.problem(400, "Cannot terminate this connection using the DELETE endpoint.")
            }
            self.logger.info(
                "client ended its long polling connection", metadata: ["connectionId": "\(link.client.connectionId)"])
            link.client.endSocket(generation: link.generation)
            return Response(status: .accepted)
        }
    }

    /// A request to the hub's connection endpoint carries a valid token, or needs none (`POST /_sim/auth?hub=open`: a
    /// hub without `[Authorize]`, as many are; signalrcore's polls carry no token).
    func hubAllows(_ request: Request) -> Bool {
        let bearer = bearer(request)
        return isValid(bearer) || (bearer == nil && faults.withLock { $0.openHub })
    }

    /// A connection over HTTP: its client, the session reading its POSTs, and for Long Polling what waits for a poll.
    final class HTTPLink: Sendable {
        let client: HubClient
        let generation: Int
        let session: HubSession
        let transport: String
        let polls = PollBuffer()

        init(client: HubClient, generation: Int, session: HubSession, transport: String) {
            self.client = client
            self.generation = generation
            self.session = session
            self.transport = transport
        }
    }

    /// Claims the negotiated connection `id` for an HTTP transport; nil when it is unknown or taken.
    private func claim(_ id: String, transport: String, bearer: String?) async -> (HTTPLink, AsyncStream<[UInt8]>)? {
        guard offers(transport), !isRefusing else { return nil }
        let (frames, sink) = AsyncStream<[UInt8]>.makeStream()
        guard let (client, generation, resumed) = await hub.attach(token: id, sink: sink) else { return nil }
        let link = HTTPLink(
            client: client, generation: generation,
            session: HubSession(self, client, transport: transport, resumed: resumed), transport: transport)
        httpLinks.withLock { $0[id] = link }
        logger.info(
            "client connected", metadata: ["connectionId": "\(client.connectionId)", "transport": "\(transport)"])
        return (link, frames)
    }

    private func release(_ id: String, _ link: HTTPLink) async {
        httpLinks.withLock { links in if links[id] === link { links[id] = nil } }
        connectionBearers.withLock { $0[id] = nil }
        await link.session.end()
        await hub.detach(link.client, generation: link.generation)
        logger.info("client disconnected", metadata: ["connectionId": "\(link.client.connectionId)"])
    }

    private func openEventStream(_ id: String, bearer: String?) async -> Response {
        guard let (link, frames) = await claim(id, transport: "ServerSentEvents", bearer: bearer) else {
            return problem(404, "No Connection with that ID")
        }
        let body = ResponseBody { writer in
            // Pings when idle; a silent client is dropped (its frames end, and so does this stream).
            let keeper = Task {
                try? await self.keepAlive(link.client, bearer: bearer)
                link.client.endSocket(generation: link.generation)
            }
            do {
                // As ASP.NET Core does: a comment first, so that the client sees the stream open at once.
                try await writer.write(ByteBuffer(string: ":\r\n"))
                for await frame in frames {
                    // One event per payload; a payload with line breaks spans several data lines.
                    var event = ""
                    for line in String(decoding: frame, as: UTF8.self).split(
                        separator: "\n", omittingEmptySubsequences: false)
                    {
                        event += "data: \(line)\r\n"
                    }
                    try await writer.write(ByteBuffer(string: event + "\r\n"))
                }
            } catch {
                link.client.endSocket(generation: link.generation)  // the client went away
            }
            keeper.cancel()
            await self.release(id, link)
            try? await writer.finish(nil)
        }
        return Response(
            status: .ok, headers: [.contentType: "text/event-stream", .cacheControl: "no-cache"], body: body)
    }

    /// Makes the negotiated connection `id` a Long Polling one: what is sent to it waits for the next poll.
    private func startLongPolling(_ id: String, bearer: String?) async -> HTTPLink? {
        guard let (link, frames) = await claim(id, transport: "LongPolling", bearer: bearer) else { return nil }
        Task {
            for await frame in frames { link.polls.add(frame) }
            link.polls.finish()
        }
        Task {
            try? await self.keepAlive(link.client, bearer: bearer)
            link.client.endSocket(generation: link.generation)
        }
        return link
    }

    private func poll(_ id: String, bearer: String?) async -> Response {
        guard let link = httpLinks.withLock({ $0[id] }) else {
            // The first poll: the connection is made and the answer comes at once, empty.
            guard await startLongPolling(id, bearer: bearer) != nil else {
                return problem(404, "No Connection with that ID")
            }
            return Response(status: .ok)
        }
        guard link.transport == "LongPolling" else {
            return problem(400, "Connection is not using the long polling transport.")
        }
        guard let bytes = await link.polls.take(within: configuration.longPollTimeout) else {
            await release(id, link)
            return Response(status: .noContent)
        }
        let type = link.client.speaksMessagePack ? "application/octet-stream" : "text/plain; charset=utf-8"
        return Response(status: .ok, headers: [.contentType: type], body: .init(byteBuffer: ByteBuffer(bytes: bytes)))
    }
}

/// What waits for a Long Polling client's next poll. One answer carries at most about 64 KiB of whole messages, as
/// ASP.NET Core's answers do (its pipes pause the hub at 64 KiB): a backlog goes out over several polls.
final class PollBuffer: Sendable {
    private struct State {
        var waiting: [[UInt8]] = []
        var ended = false
        var waiter: CheckedContinuation<Void, Never>?
        var timer: Task<Void, Never>?
    }

    private enum Taken {
        case bytes([UInt8])
        case ended, nothing
    }

    private let state = Mutex(State())
    static let answerBytes = 64 * 1024

    func add(_ frame: [UInt8]) {
        state.withLock { s in
            s.waiting.append(frame)
            wake(&s)
        }
    }

    func finish() {
        state.withLock { s in
            s.ended = true
            wake(&s)
        }
    }

    private func wake(_ s: inout State) {
        s.waiter?.resume()
        s.waiter = nil
        s.timer?.cancel()
        s.timer = nil
    }

    /// What is waiting (up to `answerBytes`), after waiting up to `timeout` for something ([] when nothing came: the
    /// poll timed out); nil once the connection ended and all was taken.
    func take(within timeout: Duration) async -> [UInt8]? {
        switch takeNow() {
        case .bytes(let b): return b
        case .ended: return nil
        case .nothing: break
        }
        await withCheckedContinuation { continuation in
            state.withLock { s in
                if !s.waiting.isEmpty || s.ended {
                    continuation.resume()
                    return
                }
                s.waiter = continuation
                s.timer = Task {
                    try? await Task.sleep(for: timeout)
                    if Task.isCancelled { return }
                    self.state.withLock { s in
                        s.waiter?.resume()
                        s.waiter = nil
                    }
                }
            }
        }
        switch takeNow() {
        case .bytes(let b): return b
        case .ended: return nil
        case .nothing: return []
        }
    }

    private func takeNow() -> Taken {
        state.withLock { s in
            guard !s.waiting.isEmpty else { return s.ended ? .ended : .nothing }
            var answer: [UInt8] = []
            var taken = 0
            for frame in s.waiting {
                if taken > 0 && answer.count + frame.count > Self.answerBytes { break }
                answer += frame
                taken += 1
            }
            s.waiting.removeFirst(taken)
            return .bytes(answer)
        }
    }
}
