import CMosquitto
import Foundation
import Synchronization

/// An MQTT connection on libmosquitto: its own network thread (`mosquitto_loop_start`), reconnects by itself with a
/// growing pause, and a QoS 1 `publish` that returns only once the broker acknowledged the message (PUBACK), so a
/// caller can count a message as delivered exactly when the broker has it. Knows nothing of the relay.
public final class MQTTClient: @unchecked Sendable {
    // @unchecked: `handle` is libmosquitto's, which is thread-safe for publish, subscribe and disconnect once its
    // loop thread runs; every field of ours is behind `state`.
    public struct Options: Sendable {
        public enum ProtocolVersion: String, Sendable, CaseIterable {
            case v5 = "5"
            case v311 = "3.1.1"
        }

        public var host: String
        public var port: Int
        public var clientId: String
        public var protocolVersion: ProtocolVersion = .v5
        /// TLS with the server's certificate checked against `caFile` (nil: the system's CAs) and its name.
        public var tls = false
        public var caFile: String?
        public var username: String?
        public var password: String?
        public var keepAlive = 30
        /// Published by the broker for us when the connection drops without a clean goodbye (retained).
        public var will: (topic: String, payload: String)?

        public init(host: String, port: Int, clientId: String) {
            self.host = host
            self.port = port
            self.clientId = clientId
        }
    }

    public let options: Options
    private let handle: OpaquePointer
    private let state = Mutex(State())

    private struct State {
        var connected = false
        var lastProblem: String?
        /// Publishes waiting for their PUBACK, by message id.
        var waiting: [Int32: CheckedContinuation<Result<Void, MQTTError>, Never>] = [:]
        /// Acknowledgements that arrived before their publisher started waiting (the network thread was quicker).
        var early: [Int32: Int32] = [:]
        var onConnect: (@Sendable () -> Void)?
        var onMessage: (@Sendable (String, [UInt8]) -> Void)?
        var onDisconnect: (@Sendable (String) -> Void)?
        /// A connection attempt was set in motion and the network thread runs: from then on it reconnects by itself.
        var connecting = false
        /// When `start` last tried to set one in motion (a broker that is down is tried again a second later).
        var lastAttempt: ContinuousClock.Instant?
        var closed = false
    }

    private static let libraryInit: Void = { mosquitto_lib_init() }()

    public init(_ options: Options) throws(MQTTError) {
        _ = Self.libraryInit
        self.options = options
        guard let m = mosquitto_new(options.clientId, true, nil) else {
            throw MQTTError("libmosquitto could not make a client (out of memory?)")
        }
        handle = m
        mosquitto_user_data_set(m, Unmanaged.passUnretained(self).toOpaque())
        mosquitto_int_option(
            m, MOSQ_OPT_PROTOCOL_VERSION,
            options.protocolVersion == .v5 ? Int32(MQTT_PROTOCOL_V5) : Int32(MQTT_PROTOCOL_V311))
        if let username = options.username {
            try check(mosquitto_username_pw_set(m, username, options.password), "username")
        }
        if options.tls {
            // Certificate and host name checked (tls_insecure stays false); the system's CAs unless a file is named.
            let capath = options.caFile == nil ? "/etc/ssl/certs" : nil
            try check(mosquitto_tls_set(m, options.caFile, capath, nil, nil, nil), "TLS setup")
        }
        if let will = options.will {
            try check(
                mosquitto_will_set(m, will.topic, Int32(will.payload.utf8.count), will.payload, 1, true), "last will")
        }
        mosquitto_reconnect_delay_set(m, 1, 30, true)
        mosquitto_connect_callback_set(m) { _, context, rc in MQTTClient.from(context).connected(rc) }
        mosquitto_disconnect_callback_set(m) { _, context, rc in MQTTClient.from(context).disconnected(rc) }
        mosquitto_publish_v5_callback_set(m) { _, context, mid, reason, _ in
            MQTTClient.from(context).acknowledged(mid, reason)
        }
        mosquitto_message_callback_set(m) { _, context, message in
            guard let message, let topic = message.pointee.topic else { return }
            let payload =
                message.pointee.payload.map {
                    Array(UnsafeRawBufferPointer(start: $0, count: Int(message.pointee.payloadlen)))
                } ?? []
            MQTTClient.from(context).received(String(cString: topic), payload)
        }
    }

    deinit {
        mosquitto_loop_stop(handle, true)
        mosquitto_destroy(handle)
    }

    private static func from(_ context: UnsafeMutableRawPointer?) -> MQTTClient {
        Unmanaged<MQTTClient>.fromOpaque(context!).takeUnretainedValue()
    }

    private func check(_ rc: Int32, _ what: String) throws(MQTTError) {
        guard rc == MOSQ_ERR_SUCCESS.rawValue else {
            throw MQTTError("\(what): \(String(cString: mosquitto_strerror(rc)))")
        }
    }

    /// Called on every (re)connection, on the network thread: the place to publish what the broker must hold.
    public var onConnect: (@Sendable () -> Void)? {
        get { state.withLock { $0.onConnect } }
        set { state.withLock { $0.onConnect = newValue } }
    }

    /// Messages on the topics subscribed to, on the network thread.
    public var onMessage: (@Sendable (String, [UInt8]) -> Void)? {
        get { state.withLock { $0.onMessage } }
        set { state.withLock { $0.onMessage = newValue } }
    }

    /// Called when an established connection drops (with why), on the network thread; it reconnects by itself.
    public var onDisconnect: (@Sendable (String) -> Void)? {
        get { state.withLock { $0.onDisconnect } }
        set { state.withLock { $0.onDisconnect = newValue } }
    }

    public var isConnected: Bool { state.withLock { $0.connected } }

    /// A connection attempt is under way or made: from now on the network thread reconnects by itself until `close`.
    public var isStarted: Bool { state.withLock { $0.connecting } }

    /// Why the last connection attempt failed or the connection dropped (nil: none yet).
    public var lastProblem: String? { state.withLock { $0.lastProblem } }

    /// Starts connecting in the background; once an attempt is under way, the network thread keeps reconnecting
    /// until `close`. An attempt that fails at once (the broker's port refuses) sets nothing in motion: libmosquitto's
    /// thread only reconnects a connection it has begun, so the next call (at most one a second) tries again.
    public func start() {
        let go = state.withLock { s -> Bool in
            guard !s.connecting, !s.closed else { return false }
            if let last = s.lastAttempt, ContinuousClock.now - last < .seconds(1) { return false }
            s.lastAttempt = .now
            return true
        }
        guard go else { return }
        let rc = mosquitto_connect_async(handle, options.host, Int32(options.port), Int32(options.keepAlive))
        guard rc == MOSQ_ERR_SUCCESS.rawValue else {
            state.withLock { $0.lastProblem = "cannot reach \(options.host):\(options.port): \(describe(rc))" }
            return
        }
        state.withLock { $0.connecting = true }
        mosquitto_loop_start(handle)
    }

    /// Waits until the connection is up, at most `timeout`.
    public func waitConnected(timeout: Duration) async -> Bool {
        let deadline = ContinuousClock.now + timeout
        while !isConnected {
            start()
            guard ContinuousClock.now < deadline, !Task.isCancelled else { return false }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return true
    }

    /// Publishes with QoS 1 and returns once the broker acknowledged it; throws when the connection is down, drops
    /// before the acknowledgement, the broker refuses the message, or `timeout` passes.
    public func publish(
        _ topic: String, _ payload: [UInt8], retain: Bool = false, timeout: Duration
    ) async throws(MQTTError) {
        var mid: Int32 = 0
        let rc = payload.withUnsafeBytes {
            mosquitto_publish(handle, &mid, topic, Int32($0.count), $0.baseAddress, 1, retain)
        }
        guard rc == MOSQ_ERR_SUCCESS.rawValue else { throw MQTTError("publish to \(topic): \(describe(rc))") }
        let id = mid
        let result = await withCheckedContinuation { (c: CheckedContinuation<Result<Void, MQTTError>, Never>) in
            let early = state.withLock { s -> Int32? in
                if let reason = s.early.removeValue(forKey: id) { return reason }
                s.waiting[id] = c
                return nil
            }
            if let early { c.resume(returning: Self.result(early, topic)) }
            Task { [weak self] in
                try? await Task.sleep(for: timeout)
                self?.finish(id, .failure(MQTTError("no acknowledgement from the broker within \(timeout)")))
            }
        }
        try result.get()
    }

    /// Publishes with QoS 1 without waiting for the acknowledgement (from a callback on the network thread, which
    /// must not wait for itself). Not for anything the caller counts as delivered.
    public func publishNow(_ topic: String, _ payload: [UInt8], retain: Bool) {
        _ = payload.withUnsafeBytes {
            mosquitto_publish(handle, nil, topic, Int32($0.count), $0.baseAddress, 1, retain)
        }
    }

    /// Subscribes (QoS 1); done again after each reconnection by the caller's `onConnect` if it must last.
    public func subscribe(_ topic: String) {
        mosquitto_subscribe(handle, nil, topic, 1)
    }

    /// Publishes `goodbye` (retained) if given, disconnects cleanly (the will is not sent) and stops the thread.
    public func close(goodbye: (topic: String, payload: String)? = nil) async {
        guard
            state.withLock({ s in
                defer { s.closed = true }
                return !s.closed && s.connecting
            })
        else { return }
        if let goodbye, isConnected {
            try? await publish(goodbye.topic, Array(goodbye.payload.utf8), retain: true, timeout: .seconds(2))
        }
        mosquitto_disconnect(handle)
        mosquitto_loop_stop(handle, false)
        failWaiting("the connection was closed")
    }

    // MARK: - The network thread's callbacks

    private func connected(_ rc: Int32) {
        let callback = state.withLock { s -> (@Sendable () -> Void)? in
            s.connected = rc == 0
            if rc != 0 {
                // MQTT 5 answers with a reason code, 3.1.1 with a CONNACK code.
                let why = options.protocolVersion == .v5 ? mosquitto_reason_string(rc) : mosquitto_connack_string(rc)
                s.lastProblem = "the broker refused the connection: \(why.map { String(cString: $0) } ?? "code \(rc)")"
            }
            return rc == 0 ? s.onConnect : nil
        }
        callback?()
    }

    private func disconnected(_ rc: Int32) {
        let (callback, problem) = state.withLock { s in
            let wasUp = s.connected
            s.connected = false
            // A connection refused at CONNACK also ends in a drop: the refusal is the reason worth keeping.
            if rc != 0, wasUp || s.lastProblem == nil {
                s.lastProblem = "the connection to \(options.host):\(options.port) dropped: \(describe(rc))"
            }
            return (wasUp && rc != 0 && !s.closed ? s.onDisconnect : nil, s.lastProblem ?? "")
        }
        callback?(problem)
        // Messages not acknowledged are not known to be with the broker: their senders try again.
        failWaiting("the connection to the broker dropped before it acknowledged the message")
    }

    private func acknowledged(_ mid: Int32, _ reason: Int32) {
        let waiter = state.withLock { s in
            guard let c = s.waiting.removeValue(forKey: mid) else {
                s.early[mid] = reason
                return nil as CheckedContinuation<Result<Void, MQTTError>, Never>?
            }
            return c
        }
        waiter?.resume(returning: Self.result(reason, nil))
    }

    private func received(_ topic: String, _ payload: [UInt8]) {
        state.withLock { $0.onMessage }?(topic, payload)
    }

    private func finish(_ mid: Int32, _ result: Result<Void, MQTTError>) {
        state.withLock { $0.waiting.removeValue(forKey: mid) }?.resume(returning: result)
    }

    private func failWaiting(_ reason: String) {
        let waiting = state.withLock { s in
            defer { s.waiting = [:] }
            return Array(s.waiting.values)
        }
        for c in waiting { c.resume(returning: .failure(MQTTError(reason))) }
    }

    /// MQTT 5 PUBACK reason codes of 0x80 and above are refusals (not authorized, quota exceeded, ...).
    private static func result(_ reason: Int32, _ topic: String?) -> Result<Void, MQTTError> {
        guard reason >= 0x80 else { return .success(()) }
        let text = String(cString: mosquitto_reason_string(reason))
        return .failure(
            MQTTError("the broker refused the message\(topic.map { " to \($0)" } ?? ""): \(text)", refused: true))
    }

    private func describe(_ rc: Int32) -> String {
        if rc == MOSQ_ERR_ERRNO.rawValue { return String(cString: strerror(errno)) }
        return String(cString: mosquitto_strerror(rc))
    }
}

public struct MQTTError: Error, Sendable, CustomStringConvertible {
    public let message: String
    /// The broker answered and said no (MQTT 5 reason code): sending the same again will not help.
    public let refused: Bool

    public init(_ message: String, refused: Bool = false) {
        self.message = message
        self.refused = refused
    }

    public var description: String { message }
}
