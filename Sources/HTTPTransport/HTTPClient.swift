import CCurl
import Core
import Foundation
import Synchronization

/// The relay's one HTTP client, on libcurl's multi interface: one service thread that sleeps in `curl_multi_poll`
/// (a silent or slow peer costs nothing while waited for), kept-alive connections shared by every request to the
/// same host, TLS checks on, proxies from the environment (`https_proxy`, `http_proxy`, `no_proxy`, as curl reads
/// them), redirects never followed (the caller decides: a token must not follow one to another host).
///
/// The service thread is also an executor (`thread`): a task that prefers it hands its requests over and gets their
/// answers back on the same thread, with no wake-up of another.
///
/// Chosen over AsyncHTTPClient by measurement (BENCHMARKS.md, "The HTTP client").
public final class HTTPClient: Sendable {
    /// The process's client: one thread and one pool of connections for every part that speaks HTTP.
    public static let shared = HTTPClient()

    /// Sent when a request sets none.
    public let userAgent: String
    private let engine: CurlEngine

    /// `threadName`: the service thread's, as `top -H` shows it.
    public convenience init(userAgent: String = "allowance-relay (Linux)", threadName: String = "http") {
        self.init(userAgent: userAgent, threadName: threadName, wakeUp: PollWake())
    }

    /// `wakeUp`: `PollWake.unavailable()` makes the client as if no eventfd were left (libcurl's wake-up stands in).
    package init(userAgent: String, threadName: String, wakeUp: PollWake) {
        self.userAgent = userAgent
        engine = CurlEngine(threadName: threadName, wakeUp: wakeUp)
    }

    deinit { engine.stop() }

    /// The service thread, as an executor for the tasks that send most (`withTaskExecutorPreference`). A job there
    /// holds up every transfer of the client while it runs: it must not block for long.
    public var thread: ThreadExecutor { engine.thread }

    /// Sends `request` and returns the answer whatever its status. Cancelling the calling task ends the request.
    public func send(_ request: HTTPRequest) async throws(HTTPError) -> HTTPResponse {
        var request = request
        if request[header: "User-Agent"] == nil { request[header: "User-Agent"] = userAgent }
        // A value with CR or LF (a token from a file, from a server) would add headers of its own.
        for (name, value) in request.headers where !(Self.isSafe(name) && Self.isSafe(value)) {
            throw HTTPError(
                .invalidRequest,
                "the \(name.filter(\.isLetter)) header holds a line break or another control character: not sent")
        }
        return try await perform(Transfer(request)).get()
    }

    /// Hands `transfer` to the engine and waits for its end; cancelling the calling task ends it.
    func perform(_ transfer: Transfer) async -> Result<HTTPResponse, HTTPError> {
        await withTaskCancellationHandler {
            await withCheckedContinuation {
                (continuation: CheckedContinuation<Result<HTTPResponse, HTTPError>, Never>) in
                transfer.continuation = continuation
                engine.submit(transfer)
            }
        } onCancel: {
            engine.cancel(transfer)
        }
    }

    private static func isSafe(_ text: String) -> Bool {
        !text.utf8.contains { ($0 < 0x20 && $0 != 0x09) || $0 == 0x7F }
    }
}

/// One request in libcurl's hands. Touched by the service thread only once submitted (the cancel flag excepted).
final class Transfer: @unchecked Sendable {
    let request: HTTPRequest
    var continuation: CheckedContinuation<Result<HTTPResponse, HTTPError>, Never>?
    let cancelled = Atomic<Bool>(false)
    var handle: UnsafeMutableRawPointer?
    var headerList: UnsafeMutablePointer<curl_slist>?
    let errorBuffer = UnsafeMutablePointer<CChar>.allocate(capacity: Int(CURL_ERROR_SIZE))
    var status = 0
    var headers: [(name: String, value: String)] = []
    var body: [UInt8] = []
    var tooLarge = false
    /// A streamed transfer: its head was handed over; it is paused until its reader has room.
    var headDelivered = false
    var paused = false
    /// Set for an e-mail: the transfer speaks SMTP instead of HTTP.
    var mail: MailTransfer?

    init(_ request: HTTPRequest) {
        self.request = request
        errorBuffer.initialize(to: 0)
    }

    deinit {
        curl_slist_free_all(headerList)
        errorBuffer.deallocate()
    }

    func finish(_ result: Result<HTTPResponse, HTTPError>) {
        continuation?.resume(returning: result)
        continuation = nil
    }
}

/// The multi handle, driven by a thread of its own that runs the jobs of the tasks that prefer it too.
final class CurlEngine: ThreadLoop, @unchecked Sendable {
    // @unchecked: `multi`, `active` and `idle` are the service thread's alone; the rest is behind `inbox`, and
    // `thread` is set once, in `init`.
    private let multi: UnsafeMutableRawPointer
    private let inbox = Mutex<Inbox>(Inbox())
    private var active: [UnsafeMutableRawPointer: Transfer] = [:]
    private var idle: [UnsafeMutableRawPointer] = []
    private(set) var thread: ThreadExecutor!
    /// Ends the thread's poll (`wake`): one write and one read, where `curl_multi_wakeup` takes a send and two reads.
    private let wakeUp: PollWake

    private struct Inbox {
        var submitted: [Transfer] = []
        var cancelled: [Transfer] = []
        var resumed: [Transfer] = []
        /// The thread has ended: a transfer submitted now fails at once.
        var ended = false
    }

    private static let globalInit: Void = { curl_global_init(Int(CURL_GLOBAL_ALL)) }()

    init(threadName: String, wakeUp: PollWake) {
        _ = Self.globalInit
        multi = curl_multi_init()
        self.wakeUp = wakeUp
        thread = ThreadExecutor(name: threadName, loop: self)
    }

    func submit(_ transfer: Transfer) {
        // One wake-up for requests submitted together: the thread takes every waiting one when it wakes. None from
        // a job on the thread itself, which hands its transfers to libcurl once its jobs have run.
        let accepted = inbox.withLock { i -> Bool? in
            guard !i.ended else { return nil }
            i.submitted.append(transfer)
            return i.submitted.count == 1
        }
        guard let first = accepted else {
            return transfer.finish(.failure(HTTPError(.cancelled, "the HTTP client was shut down")))
        }
        if first && !thread.isCurrent { wake() }
    }

    func cancel(_ transfer: Transfer) {
        // The flag covers a transfer not yet taken by the thread; the list one already running.
        transfer.cancelled.store(true, ordering: .relaxed)
        inbox.withLock { $0.cancelled.append(transfer) }
        wake()
    }

    /// A paused stream's reader has room again.
    func resume(_ transfer: Transfer) {
        inbox.withLock { $0.resumed.append(transfer) }
        wake()
    }

    /// Ends the thread once the jobs queued there have run; every transfer still open fails as cancelled.
    func stop() { thread.shutdown() }

    // MARK: ThreadLoop, on the service thread

    func turn() {
        let (submitted, cancelled, resumed) = inbox.withLock { i in
            defer { (i.submitted, i.cancelled, i.resumed) = ([], [], []) }
            return (i.submitted, i.cancelled, i.resumed)
        }
        for t in submitted { start(t) }
        for t in cancelled {
            if let handle = t.handle, active[handle] === t {
                end(handle, .failure(HTTPError(.cancelled, "cancelled")))
            }
        }
        for t in resumed where t.paused {
            if let handle = t.handle, active[handle] === t {
                t.paused = false
                curl_easy_pause(handle, CURLPAUSE_CONT)
            }
        }
        guard !active.isEmpty else { return }  // a turn after each of the thread's jobs: nothing to do, no call
        var running: Int32 = 0
        curl_multi_perform(multi, &running)
        var left: Int32 = 0
        while let message = curl_multi_info_read(multi, &left) {
            guard ccurl_msg_is_done(message) != 0 else { continue }
            let handle = ccurl_msg_handle(message)!
            end(handle, outcome(handle, ccurl_msg_result(message)))
        }
    }

    func wait() {
        // Until a socket is ready, curl's next timer, or a wake-up (a job queued, a request from another thread).
        var handedOver = curl_waitfd(fd: wakeUp.fd, events: Int16(POLLIN), revents: 0)
        curl_multi_poll(multi, &handedOver, 1, active.isEmpty ? 3_600_000 : 1000, nil)
        if handedOver.revents != 0 { wakeUp.drain() }
    }

    /// From any thread. libcurl's own wake-up stands in where the eventfd could not be made (no descriptor left at
    /// the start; `wait` then polls a descriptor of -1, which `poll` passes over).
    func wake() {
        if wakeUp.fd >= 0 { wakeUp.signal() } else { curl_multi_wakeup(multi) }
    }

    func finish() {
        let submitted = inbox.withLock { i in
            i.ended = true
            defer { i.submitted = [] }
            return i.submitted
        }
        for t in submitted { t.finish(.failure(HTTPError(.cancelled, "the HTTP client was shut down"))) }
        for handle in Array(active.keys) {
            end(handle, .failure(HTTPError(.cancelled, "the HTTP client was shut down")))
        }
        for handle in idle { curl_easy_cleanup(handle) }
        idle = []
        curl_multi_cleanup(multi)
    }

    private func start(_ t: Transfer) {
        if t.cancelled.load(ordering: .relaxed) {
            t.finish(.failure(HTTPError(.cancelled, "cancelled")))
            return
        }
        guard let handle = idle.popLast() ?? curl_easy_init() else {
            t.finish(.failure(HTTPError(.failed, "libcurl could not make a handle (out of memory?)")))
            return
        }
        let r = t.request
        let context = Unmanaged.passUnretained(t).toOpaque()
        ccurl_set_string(handle, CURLOPT_URL, r.url.absoluteString)
        ccurl_set_long(handle, CURLOPT_NOSIGNAL, 1)
        let ms = max(1, Int(min(r.timeout.inSeconds * 1000, 1e12)))  // libcurl's long milliseconds
        ccurl_set_long(handle, CURLOPT_CONNECTTIMEOUT_MS, min(ms, 10_000))
        if let stream = r.stream {
            // Long-lived: no overall timeout; the reader's own (the hub's server timeout) decides when it is dead.
            stream.resumeHook.withLock { $0 = { [weak self, weak t] in if let t { self?.resume(t) } } }
        } else {
            ccurl_set_long(handle, CURLOPT_TIMEOUT_MS, ms)
            ccurl_set_offset(handle, CURLOPT_MAXFILESIZE_LARGE, curl_off_t(r.maxResponseBytes))
        }
        ccurl_set_pointer(handle, CURLOPT_ERRORBUFFER, t.errorBuffer)
        ccurl_set_callback(handle, CURLOPT_WRITEFUNCTION, onBody)
        ccurl_set_pointer(handle, CURLOPT_WRITEDATA, context)
        if let mail = t.mail {
            mail.configure(handle, context: context)
        } else {
            configureHTTP(t, handle, context: context)
        }
        switch r.trust {
        case .system: ccurl_require_subject_alt_name(handle)
        case .caFile(let path):
            ccurl_set_string(handle, CURLOPT_CAINFO, path)
            ccurl_require_subject_alt_name(handle)
        case .insecure:
            ccurl_set_long(handle, CURLOPT_SSL_VERIFYPEER, 0)
            ccurl_set_long(handle, CURLOPT_SSL_VERIFYHOST, 0)
        }
        if r.freshConnection {
            ccurl_set_long(handle, CURLOPT_FRESH_CONNECT, 1)
            ccurl_set_long(handle, CURLOPT_FORBID_REUSE, 1)
        }
        t.handle = handle
        active[handle] = t
        curl_multi_add_handle(multi, handle)
    }

    private func configureHTTP(_ t: Transfer, _ handle: UnsafeMutableRawPointer, context: UnsafeMutableRawPointer) {
        let r = t.request
        ccurl_set_string(handle, CURLOPT_PROTOCOLS_STR, "http,https")
        ccurl_set_callback(handle, CURLOPT_HEADERFUNCTION, onHeader)
        ccurl_set_pointer(handle, CURLOPT_HEADERDATA, context)
        switch r.method {
        case .get:
            ccurl_set_long(handle, CURLOPT_HTTPGET, 1)
        case .delete:
            ccurl_set_string(handle, CURLOPT_CUSTOMREQUEST, "DELETE")
        case .post, .put, .patch:
            if r.method != .post { ccurl_set_string(handle, CURLOPT_CUSTOMREQUEST, r.method.rawValue) }
            ccurl_set_offset(handle, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(r.body.count))
            _ = r.body.withUnsafeBytes {
                ccurl_set_pointer(handle, CURLOPT_COPYPOSTFIELDS, $0.baseAddress ?? UnsafeRawPointer(t.errorBuffer))
            }
        }
        // The proxy as every transport decides it (ProxyPolicy), not as curl alone would read the environment; through a
        // CONNECT tunnel whatever the scheme, as libwebsockets does.
        if let proxy = r.proxy.proxy(for: r.url) {
            ccurl_set_string(handle, CURLOPT_PROXY, proxy.url)
            ccurl_set_long(handle, CURLOPT_HTTPPROXYTUNNEL, 1)
        } else {
            ccurl_set_string(handle, CURLOPT_PROXY, "")
        }
        // "Expect:" off: curl would otherwise wait for a 100 Continue before sending a body over 1 KiB.
        var list: UnsafeMutablePointer<curl_slist>? = curl_slist_append(nil, "Expect:")
        for (name, value) in r.headers { list = Self.append(list, header: name, value) }
        t.headerList = list
        ccurl_set_pointer(handle, CURLOPT_HTTPHEADER, list)
    }

    /// "name: value" added to curl's list, written on the stack (curl copies it) rather than as a String made for
    /// each header of each request.
    private static func append(
        _ list: UnsafeMutablePointer<curl_slist>?, header name: String, _ value: String
    ) -> UnsafeMutablePointer<curl_slist>? {
        withUnsafeTemporaryAllocation(of: CChar.self, capacity: name.utf8.count + value.utf8.count + 3) { line in
            var i = 0
            func put(_ byte: UInt8) {
                line[i] = CChar(bitPattern: byte)
                i += 1
            }
            for byte in name.utf8 { put(byte) }
            put(UInt8(ascii: ":"))
            put(UInt8(ascii: " "))
            for byte in value.utf8 { put(byte) }
            put(0)
            return curl_slist_append(list, line.baseAddress)
        }
    }

    private func outcome(_ handle: UnsafeMutableRawPointer, _ code: CURLcode) -> Result<HTTPResponse, HTTPError> {
        guard let t = active[handle] else { return .failure(HTTPError(.failed, "unknown transfer")) }
        // Only a failure says it: parsing it out of the URL for every answer was most of this function's time in a
        // soak's profile (BENCHMARKS.md, session 62).
        var host: String { t.request.url.host ?? "the server" }
        if t.tooLarge || code == CURLE_FILESIZE_EXCEEDED {
            return .failure(
                HTTPError(
                    .tooLarge, "the answer from \(host) is longer than \(t.request.maxResponseBytes) bytes: cut off"))
        }
        guard code == CURLE_OK else {
            if t.mail != nil, let refusal = smtpRefusal(handle, code, host) { return .failure(refusal) }
            let detail = String(cString: t.errorBuffer)
            let reason = detail.isEmpty ? String(cString: curl_easy_strerror(code)) : detail
            let kind: HTTPError.Kind =
                switch code {
                case CURLE_OPERATION_TIMEDOUT: .timedOut
                case CURLE_COULDNT_RESOLVE_HOST, CURLE_COULDNT_RESOLVE_PROXY, CURLE_COULDNT_CONNECT: .connect
                case CURLE_PEER_FAILED_VERIFICATION, CURLE_SSL_CONNECT_ERROR, CURLE_SSL_CACERT_BADFILE,
                    CURLE_SSL_CERTPROBLEM:
                    .tls
                default: .failed
                }
            if code == CURLE_PEER_FAILED_VERIFICATION, reason.contains("application verification failure") {
                return .failure(HTTPError(.tls, TLSAdvice.commonNameOnly(host)))
            }
            let what = kind == .timedOut ? "no answer from \(host) within \(t.request.timeout)" : "\(host): \(reason)"
            return .failure(HTTPError(kind, what))
        }
        var status = 0
        ccurl_get_long(handle, CURLINFO_RESPONSE_CODE, &status)
        return .success(HTTPResponse(status: status, headers: t.headers, body: t.body))
    }

    /// An SMTP server's "no": a refused login, a missing STARTTLS, or a 4xx/5xx reply (with its text).
    private func smtpRefusal(_ handle: UnsafeMutableRawPointer, _ code: CURLcode, _ host: String) -> HTTPError? {
        var reply = 0
        ccurl_get_long(handle, CURLINFO_RESPONSE_CODE, &reply)
        let detail = String(cString: curl_easy_strerror(code))
        switch code {
        case CURLE_LOGIN_DENIED:
            var e = HTTPError(.refused, "\(host) refused the login (\(reply)): check username and password_file")
            e.serverCode = reply
            return e
        case CURLE_USE_SSL_FAILED:
            return HTTPError(
                .tls,
                "\(host) does not offer STARTTLS: use smtps:// (port 465), or require_tls: false for a local relay")
        default:
            guard reply >= 400 else { return nil }
            var e = HTTPError(.refused, "\(host) answered \(reply) (\(detail))")
            e.serverCode = reply
            return e
        }
    }

    /// Hands the transfer's result over and keeps the handle for the next request (its connection stays in the
    /// multi handle's pool either way).
    private func end(_ handle: UnsafeMutableRawPointer, _ result: Result<HTTPResponse, HTTPError>) {
        guard let t = active.removeValue(forKey: handle) else { return }
        t.request.stream?.resumeHook.withLock { $0 = nil }
        if let stream = t.request.stream, !t.headDelivered, case .success(let answer) = result {
            t.headDelivered = true
            stream.head(answer.status)
        }
        curl_multi_remove_handle(multi, handle)
        curl_easy_reset(handle)
        if idle.count < 32 { idle.append(handle) } else { curl_easy_cleanup(handle) }
        t.handle = nil
        t.finish(result)
    }
}

/// Body bytes as they come; returning less than given makes curl end the transfer (too long).
private func onBody(
    _ data: UnsafeMutablePointer<CChar>?, _ size: Int, _ count: Int, _ context: UnsafeMutableRawPointer?
) -> Int {
    let t = Unmanaged<Transfer>.fromOpaque(context!).takeUnretainedValue()
    let n = size * count
    if let stream = t.request.stream {
        deliverHead(t, stream)
        // Paused before taking anything: curl hands the same bytes again once resumed.
        if stream.isFull() {
            t.paused = true
            return Int(CURL_WRITEFUNC_PAUSE)
        }
        stream.body(UnsafeRawBufferPointer(start: data, count: n))
        return n
    }
    guard t.body.count + n <= t.request.maxResponseBytes else {
        t.tooLarge = true
        return 0
    }
    if let data { t.body.append(contentsOf: UnsafeRawBufferPointer(start: data, count: n)) }
    return n
}

/// One header line at a time; a status line starts a new answer (after a 100 Continue), so what came before goes.
private func onHeader(
    _ data: UnsafeMutablePointer<CChar>?, _ size: Int, _ count: Int, _ context: UnsafeMutableRawPointer?
) -> Int {
    let t = Unmanaged<Transfer>.fromOpaque(context!).takeUnretainedValue()
    let n = size * count
    guard let data else { return n }
    let line = UnsafeRawBufferPointer(start: data, count: n)
    if let stream = t.request.stream, line.elementsEqual("\r\n".utf8) || line.elementsEqual("\n".utf8) {
        deliverHead(t, stream)  // the head's end: a stream's reader learns its status before any body
        return n
    }
    if line.starts(with: "HTTP/".utf8) {
        t.headers.removeAll()
    } else if let colon = line.firstIndex(of: UInt8(ascii: ":")) {
        let name = String(decoding: line[..<colon], as: UTF8.self)
        // The value without the spaces around it and the line's CRLF.
        let isSpace = { (b: UInt8) in b == 0x20 || b == 0x09 || b == 0x0D || b == 0x0A }
        var rest = line[(colon + 1)...]
        while let first = rest.first, isSpace(first) { rest = rest.dropFirst() }
        while let last = rest.last, isSpace(last) { rest = rest.dropLast() }
        let value = String(decoding: rest, as: UTF8.self)
        // Headers count toward the limit too: a peer must not send endless ones either.
        guard t.headers.count < 200 else {
            t.tooLarge = true
            return 0
        }
        t.headers.append((name, value))
    }
    return n
}

/// A streamed answer's status, once, to its reader.
private func deliverHead(_ t: Transfer, _ stream: HTTPBodyStream) {
    guard !t.headDelivered, let handle = t.handle else { return }
    var status = 0
    ccurl_get_long(handle, CURLINFO_RESPONSE_CODE, &status)
    guard status != 0 else { return }  // the head of a proxy's CONNECT answer, not the server's
    t.headDelivered = true
    stream.head(status)
}
