import Foundation
import Logging
import SignalRProtocol
import WebSocketTransport

// Receiving: frames read on the loop's thread, decoded in one pass, routed to event buffers or handlers.
extension HubConnection {
    // MARK: - Receiving

    func receiveLoop(_ transport: any HubTransport, generation: Int) async {
        var failure: HubConnectionError?
        await flushRoutes(generation: generation)  // what came with the handshake answer
        do {
            // The frames waiting are taken together, and their events handed over together: one wake-up of the
            // consumer per batch, not per frame, when the server sends faster than one frame at a time is read.
            // A long backlog is handed over every `handOverEvery` events, so a buffer is passed by at most that.
            // Events that end with one the server follows at once (a route's `followerWait`) are held for the next
            // frame, up to that wait: the pair is one hand-over.
            var hold: Duration?
            reading: while let frames = try await transport.inbox.nextBatch(within: hold) {
                for frame in frames {
                    let goOn = process(frame: frame.bytes, generation: generation)
                    if !goOn || stagedEvents >= Self.handOverEvery { await flushRoutes(generation: generation) }
                    if !goOn { break reading }  // what came before the end was handed over
                }
                hold = frames.isEmpty ? nil : routes.all.lazy.compactMap(\.followerWait).max()
                // Frames already in the socket are read first: a fast reader would otherwise wake its consumer for
                // every frame or two (the `handOverEvery` bound still applies).
                if hold == nil && !transport.hasUnreadInput { await flushRoutes(generation: generation) }
            }
        } catch {
            failure = HubConnectionError(.transport(error.kind), error.message)
        }
        await flushRoutes(generation: generation)  // an event held for a follower that did not come
        let end = link?.generation == generation ? link?.endReason : nil
        if failure == nil && end == nil && machine.state != .disconnecting {
            let info = transport.endDescription.map { " (\($0))" } ?? ""
            let what = transport.kind == .webSockets ? "WebSocket" : "connection"
            failure = HubConnectionError(.transport(.connectionLost), "The server closed the \(what)\(info).")
        }
        await transport.close()
        await linkEnded(generation: generation, error: end ?? failure)
    }

    /// Handles one transport message (one or more hub messages). Returns false when the link must end.
    @discardableResult
    func process(frame bytes: [UInt8], generation: Int) -> Bool {
        // The live link is always the newest one made (`linkGeneration`): compared without reading `link`, whose
        // read copied it (its transport, task and end reason retained and released) for every frame.
        guard generation == linkGeneration || link == nil else { return false }
        link?.lastReceive = .now
        defer { flushFrameJobs() }
        let hubProtocol = options.hubProtocol
        var protocolError: String?
        let pieces: [ArraySlice<UInt8>]
        let incomplete: Bool
        do {
            (pieces, incomplete) = try hubProtocol.split(bytes)
        } catch {
            logger.error("protocol error from the server: \(error)")
            (pieces, incomplete, protocolError) = ([], false, error.message)
        }
        for piece in pieces {
            if !routes.isEmpty, let route = readRouted(piece) {
                if acceptSequenced() {
                    route.commit()
                    stagedEvents += 1
                }
                continue
            }
            do {
                guard let message = try hubProtocol.decode(piece) else {
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
            logger.error(
                "protocol error from the server: \(hubProtocol == .json ? "a message without its 0x1E terminator" : "a message shorter than its length prefix")"
            )
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
    func readRouted(_ piece: ArraySlice<UInt8>) -> (any EventRoute)? {
        // The table, not `self`, in the closures: the connection is also referenced weakly, so each retain of it
        // takes the runtime's slow path (a side table), once a message.
        let routes = routes
        return switch options.hubProtocol {
        case .json:
            piece.withUnsafeBufferPointer { bytes in
                JSONHubProtocol.decodeInvocation(bytes) { target, reader -> (any EventRoute)? in
                    guard let (name, route) = routes.find(UnsafeRawBufferPointer(target)), route.read(name, &reader)
                    else { return nil }
                    return route
                }
            }
        case .messagepack:
            piece.withUnsafeBytes { bytes in
                MessagePackHubProtocol.decodeInvocation(bytes) { target, reader -> (any EventRoute)? in
                    guard let (name, route) = routes.find(target), route.read(name, &reader) else { return nil }
                    return route
                }
            }
        }
    }

    /// Under stateful reconnect, counts a sequenced message in; false when it must be dropped (a replay of one
    /// already processed, or one before the peer's Sequence).
    func acceptSequenced() -> Bool {
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
    func flushRoutes(generation: Int) async {
        guard !routes.isEmpty else { return }
        stagedEvents = 0
        for route in routes.all where route.hasStaged {
            if link?.generation == generation { link?.heldBack = true }
            await route.handOver(isolation: #isolation)
            if link?.generation == generation {
                link?.heldBack = false
                link?.lastReceive = .now
            }
        }
    }

    /// Returns false when the link must end (the server sent Close).
    func handle(_ message: HubMessage) -> Bool {
        if message.isSequenced, !acceptSequenced() { return true }
        switch message {
        case .invocation(let inv):
            if let (name, route) = routes.find(inv.target) {
                route.decode(name, HubArguments(target: inv.target, values: inv.arguments))
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
            case (.invocation(let target, let c), .error(let e)):
                c.resume(throwing: HubConnectionError(.invocationFailed(target: target), e))
            case (.stream(_, let c), .error(let e)):
                c.finish(throwing: HubConnectionError(.invocationFailed(target: "stream"), e))
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
    func warnOnce(_ kind: String, _ message: @autoclosure () -> String) {
        if warnedAbout.count < 32, warnedAbout.insert(kind).inserted {
            logger.warning("\(message()) (more of these are logged at debug level)")
        } else {
            logger.debug("\(message())")
        }
    }

    /// Queues the handlers of one invocation on the dispatcher; answers client-result invocations.
    func dispatch(_ inv: HubMessage.Invocation) {
        let list = handlers[inv.target.lowercased()] ?? []
        let args = HubArguments(target: inv.target, values: inv.arguments)
        let logger = self.logger
        if list.isEmpty {
            warnOnce("target:" + inv.target.lowercased(), "no handler for '\(inv.target)'")
            if let id = inv.invocationId { sendCompletion(id, .error("Client didn't provide a result.")) }
            return
        }
        let span = handlerSpan(inv)
        frameJobs.append { [weak self] in
            var results: [JSONValue] = []
            var failure: String?
            defer { span.end(failing: failure.map { HubConnectionError(.invocationFailed(target: inv.target), $0) }) }
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
                if let failure { .error(failure) } else if results.count > 1 {
                    .error("Client provided multiple results.")
                } else if let r = results.first {
                    .result(r)
                } else { .error("Client didn't provide a result.") }
            await self?.sendCompletion(id, outcome)
        }
    }

    /// Hands the frame's handler jobs to the dispatcher, in order, as one job.
    func flushFrameJobs() {
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

    func sendCompletion(_ id: String, _ outcome: HubMessage.Completion.Outcome) {
        try? write(.completion(.init(invocationId: id, outcome: outcome)))
    }
}
