import Foundation
import Hummingbird
import HummingbirdWebSocket
import NIOCore

extension HubSimulator {
    /// The hub endpoint: `GET /hubs/family?id=<connectionToken>` upgraded to a WebSocket.
    ///
    /// Hummingbird answers every refused upgrade with 400, so a missing token or an unknown id shows up as 400
    /// here (ASP.NET Core says 401 and 404); negotiate, which comes first, does answer 401.
    func hubRouter() -> Router<BasicWebSocketRequestContext> {
        let router = Router(context: BasicWebSocketRequestContext.self)
        router.ws("hubs/family") { request, _ in
            guard self.isValid(self.bearer(request)) else { return .dontUpgrade }
            if self.isRefusing || self.refusesUpgrades { return .dontUpgrade }
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
            self.logger.info(
                "client \(resumed ? "re-attached" : "connected")", metadata: ["connectionId": "\(client.connectionId)"])
            defer { self.logger.info("client disconnected", metadata: ["connectionId": "\(client.connectionId)"]) }
            let binary = self.configuration.binaryFrames
            try await withThrowingTaskGroup(of: Void.self) { group in
                // Writer: the only place that writes to this socket, so frames keep their order.
                group.addTask {
                    for await frame in frames {
                        if binary || client.speaksMessagePack {
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
                    // What is queued (a refused handshake's answer, a Close) is written before the socket closes:
                    // ending the frames lets the writer drain them and finish, which ends the connection. A client
                    // that reads nothing has a second.
                    client.endSocket(generation: generation)
                    try await Task.sleep(for: .seconds(1))
                }
                // The first task to end (writer finished, timeout, client gone) ends the connection.
                try await group.next()
                group.cancelAll()
            }
            await self.hub.detach(client, generation: generation)
            // A stateful connection may come back with its token; any other is gone.
            if !client.stateful { self.connectionBearers.withLock { $0[client.token] = nil } }
        }
        return router
    }

    func keepAlive(_ client: HubClient, bearer: String?) async throws {
        let interval = configuration.keepAliveInterval
        while !Task.isCancelled {
            try await Task.sleep(for: min(interval, .seconds(1)))
            let s = client.snapshot
            if ContinuousClock.now - s.lastReceive > configuration.clientTimeout {
                logger.warning("client timed out", metadata: ["connectionId": "\(client.connectionId)"])
                return
            }
            // The token the connection was last authenticated with: a refresh replaces the one it opened with.
            let current = connectionBearers.withLock { $0[client.token] } ?? bearer
            if mustCloseForExpiry(current) {
                logger.notice(
                    "ending a connection: its access token expired",
                    metadata: ["connectionId": "\(client.connectionId)"])
                return
            }
            if ContinuousClock.now - s.lastSend >= interval, !(await hub.isSilenced(client)) {
                client.send(.ping)
            }
        }
    }

    /// Reads the handshake, then hub messages, until the client goes away.
    private func serve(_ client: HubClient, _ inbound: WebSocketInboundStream, resumed: Bool) async throws {
        let session = HubSession(self, client, transport: "WebSockets", resumed: resumed)
        defer { Task { await session.end() } }
        for try await message in inbound.messages(maxSize: 1 << 20) {
            let bytes: [UInt8]
            switch message {
            case .text(let s): bytes = Array(s.utf8)
            case .binary(let b): bytes = Array(b.readableBytesView)
            }
            if !(await session.receive(bytes)) { return }
        }
    }
}
