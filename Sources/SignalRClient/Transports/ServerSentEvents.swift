import Foundation
import HTTPTransport
import Logging
import SignalRProtocol
import Synchronization
import WebSocketTransport

/// The Server-Sent Events transport: one long `GET {base}?id=...` (`Accept: text/event-stream`) brings the server's
/// messages, one event per payload; sends are POSTs. Text only. Its end is the stream's end (no DELETE: ASP.NET Core
/// accepts that for Long Polling only).
final class ServerSentEventsTransport: HubTransport {
    var kind: TransportKind { .serverSentEvents }
    let inbox: MessageInbox
    private let sender: HTTPSendQueue
    private let reader = Mutex<Task<Void, Never>?>(nil)
    private let ending = Mutex<String?>(nil)

    private init(inbox: MessageInbox, sender: HTTPSendQueue) {
        self.inbox = inbox
        self.sender = sender
    }

    /// Opens the stream and returns once the server answered 200 to it.
    static func open(
        _ target: HTTPTransportTarget, loop: WebSocketLoop, connectTimeout: Duration
    ) async throws(HubConnectionError)
        -> ServerSentEventsTransport
    {
        let inbox = MessageInbox(loop: loop)
        let sender = HTTPSendQueue(target) { error in
            inbox.finish(.failure(WebSocketError(.connectionLost, error.message)))
        }
        let transport = ServerSentEventsTransport(inbox: inbox, sender: sender)
        let parser = Mutex(ServerSentEventParser())
        let (heads, headContinuation) = AsyncStream<Int>.makeStream()
        let stream = HTTPBodyStream(
            head: { status in headContinuation.yield(status) },
            body: { bytes in
                let events = parser.withLock { $0.feed(bytes) }
                for event in events { _ = inbox.push(.text(event)) }
            },
            isFull: { inbox.isHoldingBack })
        inbox.onResume { stream.resume() }
        var request = target.request(.get, timeout: connectTimeout)
        request[header: "Accept"] = "text/event-stream"
        request[header: "Cache-Control"] = "no-cache"
        request.stream = stream
        let finished = Mutex<HTTPError?>(nil)
        let task = Task {
            do throws(HTTPError) {
                _ = try await target.client.send(request)
                transport.ended("the server ended the event stream")
            } catch {
                finished.withLock { $0 = error }
                transport.ended(error.message)
            }
            headContinuation.finish()
        }
        transport.reader.withLock { $0 = task }
        var iterator = heads.makeAsyncIterator()
        guard let status = await iterator.next() else {
            let reason = finished.withLock { $0 }?.message ?? "the server closed the connection"
            throw HubConnectionError(.transport(.connectionLost), "The event stream did not open: \(reason).")
        }
        if let refusal = HTTPTransportTarget.refusal(status, "the event stream") {
            task.cancel()
            throw refusal
        }
        return transport
    }

    private func ended(_ reason: String) {
        let first = ending.withLock { e -> Bool in
            guard e == nil else { return false }
            e = reason
            return true
        }
        guard first else { return }
        sender.stop(HubConnectionError(.transport(.connectionLost), "The event stream ended."))
        inbox.finish(.success(()))
    }

    func send(_ payload: [UInt8]) throws(HubConnectionError) { try sender.send(payload) }
    var hasUnreadInput: Bool { false }
    var endDescription: String? { ending.withLock { $0 } }

    func close() async {
        let task = reader.withLock { $0 }
        ended("closed by the client")
        task?.cancel()
        await task?.value
    }
}

/// Reads `text/event-stream` (the WHATWG rules the hub server follows): lines end with CRLF, LF or CR; `data:` lines
/// make the event's payload, joined by LF; an empty line ends the event; lines starting with `:` are comments
/// (keep-alives); other fields are ignored. A value loses one leading space.
struct ServerSentEventParser {
    private var line: [UInt8] = []
    private var data: [UInt8] = []
    private var hasData = false
    private var afterCR = false
    /// A line longer than this is cut off (a hostile server must not make it grow without end).
    static let maxLine = 16 << 20

    /// The events that `bytes` completes, in order.
    mutating func feed(_ bytes: UnsafeRawBufferPointer) -> [[UInt8]] {
        var events: [[UInt8]] = []
        for b in bytes {
            if afterCR {
                afterCR = false
                if b == 0x0A { continue }  // CRLF: the line already ended at CR
            }
            if b == 0x0D || b == 0x0A {
                afterCR = b == 0x0D
                if let event = endLine() { events.append(event) }
            } else if line.count < Self.maxLine {
                line.append(b)
            }
        }
        return events
    }

    private mutating func endLine() -> [UInt8]? {
        defer { line.removeAll(keepingCapacity: true) }
        if line.isEmpty {
            guard hasData else { return nil }
            defer {
                data = []
                hasData = false
            }
            return data
        }
        if line.first == UInt8(ascii: ":") { return nil }
        let colon = line.firstIndex(of: UInt8(ascii: ":")) ?? line.endIndex
        guard line[..<colon].elementsEqual("data".utf8) else { return nil }
        var value = line[min(colon + 1, line.endIndex)...]
        if value.first == 0x20 { value = value.dropFirst() }
        if hasData { data.append(0x0A) }
        data += value
        hasData = true
        return nil
    }
}
