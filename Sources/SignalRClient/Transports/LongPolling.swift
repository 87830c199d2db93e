import Foundation
import HTTPTransport
import Logging
import SignalRProtocol
import Synchronization
import WebSocketTransport

/// The Long Polling transport: `GET {base}?id=...` again and again, each answer carrying whatever messages waited
/// (200 with an empty body: the server's poll timeout, poll again; 204: the server closed the connection; 404: it no
/// longer knows it). The first poll returns at once and confirms the connection. Sends are POSTs; the end is a DELETE.
final class LongPollingTransport: HubTransport {
    var kind: TransportKind { .longPolling }
    let inbox: MessageInbox
    private let target: HTTPTransportTarget
    private let sender: HTTPSendQueue
    private let poller = Mutex<Task<Void, Never>?>(nil)
    private let ending = Mutex<String?>(nil)
    /// Longer than ASP.NET Core's poll timeout (90 s), so that an answer that is merely held is not taken for a dead peer.
    static let pollTimeout = Duration.seconds(120)

    private init(target: HTTPTransportTarget, inbox: MessageInbox) {
        self.target = target
        self.inbox = inbox
        sender = HTTPSendQueue(target) { error in inbox.finish(.failure(WebSocketError(.connectionLost, error.message)))
        }
    }

    /// Makes the first poll, which the server answers at once, then keeps polling.
    static func open(
        _ target: HTTPTransportTarget, loop: WebSocketLoop, connectTimeout: Duration
    ) async throws(HubConnectionError)
        -> LongPollingTransport
    {
        let transport = LongPollingTransport(target: target, inbox: MessageInbox(loop: loop))
        let first: HTTPResponse
        do {
            first = try await target.client.send(target.request(.get, timeout: connectTimeout))
        } catch {
            throw HubConnectionError(
                .transport(error.kind == .timedOut ? .timeout : .connectionLost),
                "The first poll failed: \(error.message)")
        }
        if let refusal = HTTPTransportTarget.refusal(first.status == 204 ? 404 : first.status, "the first poll") {
            throw refusal
        }
        if !first.body.isEmpty { _ = transport.deliver(first.body) }
        let task = Task { await transport.pollLoop() }
        transport.poller.withLock { $0 = task }
        return transport
    }

    private func deliver(_ body: [UInt8]) -> Bool {
        inbox.push(target.format == .text ? .text(body) : .binary(body))
    }

    private func pollLoop() async {
        // Once the transport has ended (closed by the client: its DELETE is on the way) no new poll is made.
        while !Task.isCancelled {
            await roomToRead()
            if ending.withLock({ $0 != nil }) { return }
            let answer: HTTPResponse
            do {
                answer = try await target.client.send(target.request(.get, timeout: Self.pollTimeout))
            } catch  where error.kind == .timedOut {
                continue  // as the official clients do: a poll that timed out is simply made again
            } catch {
                if !Task.isCancelled {
                    end(.failure(WebSocketError(.connectionLost, "A poll failed: \(error.message)")))
                }
                return
            }
            switch answer.status {
            case 200:
                if !answer.body.isEmpty { _ = deliver(answer.body) }
            case 204:
                end(.success(()), reason: "the server closed the connection (HTTP 204)")
                return
            default:
                let refusal = HTTPTransportTarget.refusal(answer.status, "a poll")
                end(.failure(WebSocketError(.connectionLost, refusal?.message ?? "HTTP \(answer.status)")))
                return
            }
        }
    }

    /// Back-pressure: no new poll while the reader is behind (the server keeps the messages meanwhile).
    private func roomToRead() async {
        guard inbox.isHoldingBack else { return }
        let (resumed, continuation) = AsyncStream<Void>.makeStream()
        inbox.onResume { continuation.yield() }
        if inbox.isHoldingBack {
            for await _ in resumed { break }
        }
        inbox.onResume {}
    }

    private func end(_ result: Result<Void, WebSocketError>, reason: String? = nil) {
        let first = ending.withLock { e -> Bool in
            guard e == nil else { return false }
            switch result {
            case .success: e = reason ?? "ended"
            case .failure(let error): e = error.message
            }
            return true
        }
        guard first else { return }
        sender.stop(HubConnectionError(.transport(.connectionLost), "The connection ended."))
        inbox.finish(result)
    }

    func send(_ payload: [UInt8]) throws(HubConnectionError) { try sender.send(payload) }
    var hasUnreadInput: Bool { false }
    var endDescription: String? { ending.withLock { $0 } }

    /// Tells the server with a DELETE (its answer ends the poll under way), then stops polling.
    func close() async {
        let wasOpen = ending.withLock { $0 == nil }
        end(.success(()), reason: "closed by the client")
        if wasOpen { _ = try? await target.client.send(target.request(.delete, timeout: .seconds(5))) }
        let task = poller.withLock { $0 }
        task?.cancel()
        await task?.value
    }
}
