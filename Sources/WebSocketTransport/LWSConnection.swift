import CLibWebSockets
import Foundation
import Logging
import Synchronization

/// The lws side of one connection: its wsi on a `WebSocketLoop`, and the callback's work for it.
///
/// `@unchecked Sendable`: the fields under "loop thread only" are touched by the loop's thread alone (and by `init`
/// and `start` before the loop is asked to do anything); whatever other threads share lives in `shared`, a Mutex.
final class LWSConnection: @unchecked Sendable {
    private struct Shared {
        var outbox: [WebSocketMessage] = []
        var outboxHead = 0
        var bufferedBytes = 0
        var closeRequest: WebSocketClose?
        var closeInfo: WebSocketClose?
        var resumeReading = false
        var forceStop = false
        var connectDeadlinePassed = false
        var stopped = false
        var stopWaiters: [CheckedContinuation<Void, Never>] = []
        var ended = false
    }

    let inbox: MessageInbox
    private let shared = Mutex(Shared())
    let options: WebSocketOptions
    private let address: WebSocketAddress
    let loop: WebSocketLoop
    /// A loop made for this connection alone, shut down when it ends.
    private let ownsLoop: Bool

    // Loop thread only.
    private var started = false
    private var finished = false
    /// The wsi from the connect call, until the connection ends; `wsi` once the upgrade is done.
    private var wsiHandle: OpaquePointer?
    private var wsi: OpaquePointer?
    private var receiving: [UInt8] = []
    private var receivingBinary = false
    private var established = false
    private var onEstablished: ((Result<Void, WebSocketError>) -> Void)?
    private var failure: WebSocketError?
    private var peerClose: WebSocketClose?
    private var oversize = false
    private var writeBuffer: [UInt8] = []
    /// The server's certificate was refused for naming its host in the Common Name only (the loop's TLS check).
    var lacksSubjectAltName = false

    // C memory that must live as long as the wsi.
    private let cHost: UnsafeMutablePointer<CChar>
    private let cHostHeader: UnsafeMutablePointer<CChar>
    private let cPath: UnsafeMutablePointer<CChar>
    private let retryPolicy: UnsafeMutablePointer<lws_retry_bo_t>

    init(address: WebSocketAddress, options: WebSocketOptions, loop: WebSocketLoop?) {
        self.address = address
        self.options = options
        ownsLoop = loop == nil
        let loop =
            loop
            ?? WebSocketLoop(
                name: "lws-\(address.port)", caFile: options.caFile, connectTimeout: options.connectTimeout,
                proxy: options.proxy.proxy(for: address.url))
        self.loop = loop
        cHost = strdup(address.host)
        cHostHeader = strdup(address.hostHeader)
        cPath = strdup(address.path)
        retryPolicy = .allocate(capacity: 1)
        var policy = lws_retry_bo_t()
        if let ping = options.pingInterval {
            let secs = UInt16(clamping: max(1, ping.components.seconds))
            policy.secs_since_valid_ping = secs
            policy.secs_since_valid_hangup = secs &* 2
        }
        retryPolicy.initialize(to: policy)
        inbox = MessageInbox(
            loop: loop, highWater: options.receiveBufferMessages, highWaterBytes: options.receiveBufferBytes)
        inbox.onResume { [weak self] in self?.requestResumeReading() }
    }

    deinit {
        free(cHost)
        free(cHostHeader)
        free(cPath)
        retryPolicy.deinitialize(count: 1)
        retryPolicy.deallocate()
    }

    // MARK: - Any thread

    /// Starts the connect on the loop. `done` is called once, on the loop's thread, when the upgrade succeeded or
    /// failed.
    func start(_ done: @escaping (Result<Void, WebSocketError>) -> Void) {
        onEstablished = done  // read by the loop after `request`, which orders it
        loop.request(self)
        // lws bounds DNS and TCP but not the wait for the upgrade answer: enforce the whole deadline here.
        loop.schedule(after: options.connectTimeout) { [weak self] in
            guard let self else { return }
            shared.withLock { $0.connectDeadlinePassed = true }
            serve()
        }
    }

    /// Loop thread: does what the connection was asked to do (start, give up, close, write, read again).
    func serve() {
        if !started {
            started = true
            connect()
            return
        }
        guard !finished else { return }
        let (force, deadline, resume, close) = shared.withLock { s in
            defer { s.resumeReading = false }
            return (s.forceStop, s.connectDeadlinePassed, s.resumeReading, s.closeRequest != nil)
        }
        if force {
            end(kill: true)
            return
        }
        if !established && deadline {
            fail(
                WebSocketError(
                    .timeout,
                    "Connecting to \(address.host):\(address.port) timed out after \(options.connectTimeout) without a WebSocket upgrade answer."
                ))
            end(kill: true)
            return
        }
        guard let conn = wsi else {
            if close && !established { end(kill: true) }
            return
        }
        if resume { lws_rx_flow_control(conn, 1) }
        if hasPendingWrites || close { lws_callback_on_writable(conn) }
    }

    /// Loop thread: the socket holds bytes not read yet (more frames are coming now).
    var hasUnreadInput: Bool {
        guard let wsi, !finished else { return false }
        return clws_unread_bytes(wsi) > 0
    }

    /// Loop thread: the loop is shutting down with this connection open.
    func abandon() {
        if failure == nil {
            failure = WebSocketError(.connectionLost, "The WebSocket loop was shut down with the connection open.")
        }
        end(kill: true)
    }

    private func connect() {
        guard let ctx = loop.context(tls: address.secure) else {
            fail(WebSocketError(.setupFailed, "Could not create the libwebsockets context."))
            end(kill: false)
            return
        }
        var ci = lws_client_connect_info()
        ci.context = ctx
        ci.address = UnsafePointer(cHost)
        ci.port = Int32(address.port)
        ci.path = UnsafePointer(cPath)
        ci.host = UnsafePointer(cHostHeader)
        ci.origin = UnsafePointer(cHostHeader)  // lws writes "Origin: http(s)://" and this
        ci.ietf_version_or_minus_one = -1
        ci.local_protocol_name = UnsafePointer(loop.protocolName)
        ci.retry_and_idle_policy = UnsafePointer(retryPolicy)
        // The loop holds the connection while lws may call back about it (`opened` until `closed`).
        ci.opaque_user_data = Unmanaged.passUnretained(self).toOpaque()
        if address.secure {
            var flags = Int32(LCCSCF_USE_SSL.rawValue)
            if options.allowInsecureTLS {
                flags |= Int32(
                    LCCSCF_ALLOW_SELFSIGNED.rawValue | LCCSCF_SKIP_SERVER_CERT_HOSTNAME_CHECK.rawValue
                        | LCCSCF_ALLOW_EXPIRED.rawValue | LCCSCF_ALLOW_INSECURE.rawValue)
            }
            ci.ssl_connection = flags
        }
        loop.opened(self)
        let made = lws_client_connect_via_info(&ci)
        guard !finished else { return }  // failed inside the call (a connection error callback)
        guard let made else {
            // lws 4.1.6 returns NULL without a callback when the name does not resolve; say why.
            fail(diagnoseStartFailure())
            end(kill: false)
            return
        }
        wsiHandle = made
    }

    /// Loop thread: the connection is over. lws hears no more of it (its wsi forgets us, and is killed unless lws is
    /// already closing it); the reader and `close()` learn how it ended.
    private func end(kill: Bool) {
        guard !finished else { return }
        finished = true
        if let h = wsiHandle {
            lws_set_opaque_user_data(h, nil)
            if kill { lws_set_timeout(h, PENDING_TIMEOUT_USER_OK, LWS_TO_KILL_ASYNC) }
        }
        wsiHandle = nil
        wsi = nil
        finishInbox()
        markStopped()
        loop.closed(self)
        if ownsLoop { loop.shutdown() }
    }

    private func diagnoseStartFailure() -> WebSocketError {
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var result: UnsafeMutablePointer<addrinfo>?
        let rc = getaddrinfo(address.host, nil, &hints, &result)
        if let result { freeaddrinfo(result) }
        if rc != 0 {
            let why = String(cString: gai_strerror(rc))
            return WebSocketError(
                .dnsFailure, "Could not resolve the host name '\(address.host)' (\(why)). Check the URL and DNS.")
        }
        return WebSocketError(
            .setupFailed, "libwebsockets could not start a connection to \(address.host):\(address.port).")
    }

    func enqueue(_ message: WebSocketMessage) throws(WebSocketError) {
        let ok = shared.withLock { s -> Bool in
            guard !s.ended, s.closeRequest == nil else { return false }
            s.outbox.append(message)
            s.bufferedBytes += message.bytes.count
            return true
        }
        guard ok else {
            throw WebSocketError(.notConnected, "The WebSocket connection is closed; the message was not sent.")
        }
        loop.request(self)
    }

    var bufferedAmount: Int { shared.withLock { $0.bufferedBytes } }
    var closeInfo: WebSocketClose? { shared.withLock { $0.closeInfo } }

    func requestClose(code: UInt16, reason: String) {
        shared.withLock { s in
            if s.closeRequest == nil { s.closeRequest = WebSocketClose(code: code, reason: reason) }
        }
        loop.request(self)
    }

    func requestResumeReading() {
        shared.withLock { $0.resumeReading = true }
        loop.request(self)
    }

    /// Waits for the connection to end. With `grace`, drops it if the close handshake takes longer.
    func waitUntilStopped(grace: Duration? = nil) async {
        if let grace {
            loop.schedule(after: grace) { [weak self] in
                guard let self else { return }
                shared.withLock { $0.forceStop = true }
                serve()
            }
        }
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            let done = shared.withLock { s -> Bool in
                if s.stopped { return true }
                s.stopWaiters.append(c)
                return false
            }
            if done { c.resume() }
        }
    }

    private func markStopped() {
        let waiters = shared.withLock { s -> [CheckedContinuation<Void, Never>] in
            s.stopped = true
            s.ended = true
            defer { s.stopWaiters = [] }
            return s.stopWaiters
        }
        waiters.forEach { $0.resume() }
    }

    // MARK: - Loop thread (lws callbacks)

    func handle(
        _ wsi: OpaquePointer?, _ reason: lws_callback_reasons, _ input: UnsafeMutableRawPointer?, _ len: Int
    ) -> Int32 {
        if wsiHandle == nil { wsiHandle = wsi }
        switch reason {
        case LWS_CALLBACK_CLIENT_APPEND_HANDSHAKE_HEADER:
            guard let input else { return 0 }
            let p = input.assumingMemoryBound(to: UnsafeMutablePointer<UInt8>?.self)
            guard let start = p.pointee else { return 0 }
            let end = start + len
            for (name, value) in options.headers {
                let n = name.hasSuffix(":") ? name : name + ":"
                let ok = n.withCString { cn in
                    value.withCString { cv in
                        lws_add_http_header_by_name(
                            wsi, UnsafeRawPointer(cn).assumingMemoryBound(to: UInt8.self),
                            UnsafeRawPointer(cv).assumingMemoryBound(to: UInt8.self), Int32(strlen(cv)), p, end)
                    }
                }
                if ok != 0 {
                    fail(
                        WebSocketError(
                            .setupFailed, "The request headers do not fit in libwebsockets' buffer (header '\(name)').")
                    )
                    return -1
                }
            }
        case LWS_CALLBACK_CLIENT_ESTABLISHED:
            self.wsi = wsi
            established = true
            onEstablished?(.success(()))
            onEstablished = nil
            if hasPendingWrites { lws_callback_on_writable(wsi) }
        case LWS_CALLBACK_CLIENT_CONNECTION_ERROR:
            let text = input.map { String(cString: $0.assumingMemoryBound(to: CChar.self)) } ?? ""
            let status = Int(lws_http_client_http_response(wsi))
            fail(
                .connecting(
                    to: address, text, status: status, connectTimeout: options.connectTimeout,
                    lacksSubjectAltName: lacksSubjectAltName))
            end(kill: false)
        case LWS_CALLBACK_CLIENT_RECEIVE:
            if let input, len > 0 {
                if receiving.isEmpty { receivingBinary = lws_frame_is_binary(wsi) != 0 }
                if receiving.count + len > options.maxMessageSize || oversize {
                    // lws 4.1.6 corrupts its heap if lws_close_reason is called from RECEIVE: stop reading,
                    // and close with 1009 from WRITEABLE, where lws expects it.
                    if !oversize {
                        oversize = true
                        fail(
                            WebSocketError(
                                .messageTooLarge,
                                "The server sent a message larger than the \(options.maxMessageSize)-byte limit; closed with code 1009. Raise the maximum message size if such messages are expected."
                            ))
                        shared.withLock { $0.closeRequest = WebSocketClose(code: 1009, reason: "message too big") }
                        lws_rx_flow_control(wsi, 0)
                        lws_callback_on_writable(wsi)
                    }
                    receiving = []
                    return 0
                }
                receiving.append(contentsOf: UnsafeRawBufferPointer(start: input, count: len))
            } else if receiving.isEmpty {
                receivingBinary = lws_frame_is_binary(wsi) != 0
            }
            if lws_is_final_fragment(wsi) != 0 && lws_remaining_packet_payload(wsi) == 0 {
                let message: WebSocketMessage = receivingBinary ? .binary(receiving) : .text(receiving)
                receiving = []
                receiving.reserveCapacity(256)
                if inbox.push(message) { lws_rx_flow_control(wsi, 0) }
            }
        case LWS_CALLBACK_CLIENT_WRITEABLE:
            return writeNext(wsi)
        case LWS_CALLBACK_WS_PEER_INITIATED_CLOSE:
            var code: UInt16?
            var reasonText = ""
            if let input, len >= 2 {
                let b = input.assumingMemoryBound(to: UInt8.self)
                code = UInt16(b[0]) << 8 | UInt16(b[1])
                reasonText = String(decoding: UnsafeBufferPointer(start: b + 2, count: len - 2), as: UTF8.self)
            }
            peerClose = WebSocketClose(code: code, reason: reasonText)
        case LWS_CALLBACK_CLIENT_CLOSED:
            end(kill: false)
        default:
            break
        }
        return 0
    }

    private var hasPendingWrites: Bool { shared.withLock { $0.outboxHead < $0.outbox.count } }

    /// Writes exactly one frame (lws allows one `lws_write` per WRITEABLE), or the close frame once all is sent.
    private func writeNext(_ wsi: OpaquePointer?) -> Int32 {
        let (next, close, more) = shared.withLock { s -> (WebSocketMessage?, WebSocketClose?, Bool) in
            if s.outboxHead < s.outbox.count {
                let m = s.outbox[s.outboxHead]
                s.outboxHead += 1
                s.bufferedBytes -= m.bytes.count
                if s.outboxHead == s.outbox.count {
                    s.outbox.removeAll(keepingCapacity: true)
                    s.outboxHead = 0
                }
                return (m, nil, s.outboxHead < s.outbox.count || s.closeRequest != nil)
            }
            return (nil, s.closeRequest, false)
        }
        if let next {
            let bytes = next.bytes
            let pre = clws_pre()
            writeBuffer.removeAll(keepingCapacity: true)
            writeBuffer.append(contentsOf: repeatElement(0, count: pre))
            writeBuffer.append(contentsOf: bytes)
            let kind: lws_write_protocol = if case .binary = next { LWS_WRITE_BINARY } else { LWS_WRITE_TEXT }
            let written = writeBuffer.withUnsafeMutableBufferPointer { buf in
                lws_write(wsi, buf.baseAddress! + pre, bytes.count, kind)
            }
            if written < bytes.count {
                fail(WebSocketError(.connectionLost, "Writing to the WebSocket failed; the connection is gone."))
                return -1
            }
            if more { lws_callback_on_writable(wsi) }
            return 0
        }
        if let close {
            let code = close.code ?? 1000
            shared.withLock { $0.closeInfo = close }
            close.reason.withCString { c in
                lws_close_reason(
                    wsi, lws_close_status(UInt32(code)),
                    UnsafeMutableRawPointer(mutating: c).assumingMemoryBound(to: UInt8.self), min(strlen(c), 123))
            }
            return -1
        }
        return 0
    }

    private func fail(_ error: WebSocketError) {
        if failure == nil { failure = error }
        if let done = onEstablished {
            onEstablished = nil
            done(.failure(error))
        }
    }

    private func finishInbox() {
        if let done = onEstablished {
            onEstablished = nil
            done(
                .failure(
                    failure
                        ?? WebSocketError(
                            .connectionLost, "The connection closed before the WebSocket upgrade completed.")))
        }
        let ownClose = shared.withLock { $0.closeInfo }
        if let peerClose {
            shared.withLock { $0.closeInfo = peerClose }
        }
        if let failure, established {
            inbox.finish(.failure(failure))
        } else if peerClose != nil || ownClose != nil {
            inbox.finish(.success(()))
        } else {
            inbox.finish(
                .failure(
                    WebSocketError(
                        .connectionLost,
                        "The connection to \(address.host):\(address.port) was lost without a close handshake.")))
        }
    }
}
