import Foundation
import SignalRProtocol

// Sending: invocations and their table of pending results and streams.
extension HubConnection {
    // MARK: - Sending

    func write(_ message: HubMessage) throws(HubConnectionError) {
        let bytes = options.hubProtocol.encode(message)
        // Under stateful reconnect a tracked message is kept for replay, so it is not lost with the socket.
        let kept = stateful != nil && message.isSequenced
        if kept { stateful?.sent(bytes) }
        guard let link else {
            if kept { return }
            throw HubConnectionError(.invalidState, "The connection is \(state.rawValue); nothing can be sent.")
        }
        do {
            try link.transport.send(bytes)
        } catch {
            if kept { return }
            throw error
        }
        self.link?.lastSend = .now
    }

    func newInvocationId() -> String {
        defer { nextInvocationId += 1 }
        return String(nextInvocationId)
    }

    /// Calls a hub method and waits for its Completion. Returns the result, or nil for a void method.
    public func invoke(_ target: String, _ arguments: [JSONValue] = []) async throws -> JSONValue? {
        await waitForSendSpace()
        let id = newInvocationId()
        let (span, headers) = invocationSpan(target)
        do {
            let result = try await withTaskCancellationHandler {
                try await withCheckedThrowingContinuation { (c: CheckedContinuation<JSONValue?, any Error>) in
                    do {
                        try write(
                            .invocation(.init(invocationId: id, target: target, arguments: arguments, headers: headers))
                        )
                        pending[id] = .invocation(target: target, c)
                    } catch {
                        c.resume(throwing: error)
                    }
                }
            } onCancel: {
                Task { await self.cancelInvocation(id) }
            }
            span.end(failing: nil)
            return result
        } catch {
            span.end(failing: error)
            throw error
        }
    }

    /// Calls a hub method and decodes its result as `T`.
    public func invoke<T: Decodable & Sendable>(
        _ target: String, _ arguments: [JSONValue] = [], returning: T.Type
    ) async throws -> T {
        let value = try await invoke(target, arguments) ?? .null
        return try HubArguments(target: target, values: [value]).decode(0, as: T.self)
    }

    /// Sends an invocation without waiting for (or getting) a Completion.
    public func send(_ target: String, _ arguments: [JSONValue] = []) async throws(HubConnectionError) {
        await waitForSendSpace()
        let (span, headers) = invocationSpan(target)
        do {
            try write(.invocation(.init(target: target, arguments: arguments, headers: headers)))
            span.end(failing: nil)
        } catch {
            span.end(failing: error)
            throw error
        }
    }

    /// Starts a server-to-client stream. Ending the iteration early sends CancelInvocation.
    public func stream(_ target: String, _ arguments: [JSONValue] = []) -> AsyncThrowingStream<JSONValue, any Error> {
        let id = newInvocationId()
        let (stream, continuation) = AsyncThrowingStream<JSONValue, any Error>.makeStream()
        let (span, headers) = invocationSpan(target)
        do {
            try write(
                .streamInvocation(.init(invocationId: id, target: target, arguments: arguments, headers: headers)))
            pending[id] = .stream(target: target, continuation)
            // The span lasts as long as the stream.
            continuation.onTermination = { [weak self] reason in
                switch reason {
                case .finished(let error): span.end(failing: error)
                case .cancelled:
                    span.end(failing: nil)
                    Task { await self?.cancelStream(id) }
                @unknown default: span.end(failing: nil)
                }
            }
        } catch {
            span.end(failing: error)
            continuation.finish(throwing: error)
        }
        return stream
    }

    func cancelStream(_ id: String) {
        guard pending.removeValue(forKey: id) != nil else { return }
        try? write(.cancelInvocation(invocationId: id))
    }

    /// The caller gave up waiting: it gets CancellationError, and the server a CancelInvocation, which an ASP.NET
    /// Core 11 hub turns into its method's cancellation token (as the .NET 11 client does). Older servers ignore a
    /// CancelInvocation for an id that is not a stream; a Completion that still comes is dropped.
    func cancelInvocation(_ id: String) {
        guard case .invocation(_, let c) = pending.removeValue(forKey: id) else { return }
        c.resume(throwing: CancellationError())
        try? write(.cancelInvocation(invocationId: id))
    }
}
