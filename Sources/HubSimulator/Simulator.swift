import Foundation
import Hummingbird
import HummingbirdWebSocket
import Logging
import NIOCore
import SignalRProtocol
import Synchronization

/// How the simulator runs. Every switch can also be flipped at run time under `/_sim/`.
public struct SimulatorConfiguration: Sendable {
    public var host = "127.0.0.1"
    /// 0 picks a free port; the `listening` line says which.
    public var port = 0
    /// Accepted as a bearer token besides those the login endpoint issues.
    public var token: String?
    /// How long tokens from `POST /api/v1/auth/login` live.
    public var tokenLifetime: Duration = .seconds(3600)
    public var seed: UInt64 = 42
    /// `TransactionCreated` carries the whole transaction (true) or only its id string (as older servers send it).
    public var fullTransactionPayload = true
    /// Generated transactions per second (0: none).
    public var activityRate = 0.0
    /// Transactions generated at start.
    public var burst = 0
    /// Server pings every this often when nothing else was sent.
    public var keepAliveInterval: Duration = .seconds(15)
    /// A client silent for this long is dropped.
    public var clientTimeout: Duration = .seconds(30)
    /// Send hub messages as Binary frames (some servers do).
    public var binaryFrames = false
    /// Where the family is kept across restarts (nil: a fresh family from the seed each start). Written after each
    /// change, so a restarted simulator is the same backend, not a reset one.
    public var stateFile: String?

    public init() {}
}

/// The stand-in Allowance Tracker backend: REST under /api/v1, the hub at /hubs/family, switches under /_sim/.
public final class HubSimulator: Sendable {
    public let configuration: SimulatorConfiguration
    let family: FamilyStore
    let hub: Hub
    let logger: Logger
    private let faults = Mutex(Faults())
    private let tokens = Mutex<[String: ContinuousClock.Instant]>([:])
    private let logins = Atomic<Int>(0)
    private let webhooks = Atomic<Int>(0)
    /// `GET /api/v1/children`: every catch-up starts with one.
    private let childrenRequests = Atomic<Int>(0)
    let blast = BlastState()

    struct Faults {
        var fullPayload = true
        var refuseUntil: ContinuousClock.Instant?
        var restMode = "ok"
        var restCount = 0
        var slowDelay: Duration = .seconds(5)
        /// Login tokens issued from now on live this long (nil: the configuration's `tokenLifetime`).
        var tokenLifetime: Duration?
        /// End a hub connection once the token it was opened with expires (ASP.NET Core's
        /// `CloseOnAuthenticationExpiration`): the transport just ends, the client reconnects with a new token.
        var closeOnTokenExpiry = false
        /// A server that returns at most this many transactions per page, whatever `limit` asked.
        var pageCap: Int?
        /// "ok"; "ignore-offset": every page is the first one; "endless": every page is new transactions.
        var pageMode = "ok"
        /// Rows no real server should send (an amount of 0, three decimals, a date in the future), per child, each
        /// after the family's first `after` transactions: `POST /_sim/badrow`.
        var badRows: [UUID: [(after: Int, row: JSONValue)]] = [:]
        /// A hub that ends every connection right after its handshake: "close" (Close with allowReconnect) or
        /// "malformed" (a frame that is not JSON). `POST /_sim/flap?mode=`.
        var flap: String?
        /// The whole backend is down: REST answers 503, the hub refuses, no activity.
        var down = false
        /// The configured bearer token is no longer accepted (`POST /_sim/revoke?static=true`): a token rotated on
        /// the server.
        var staticTokenRevoked = false
    }

    public init(configuration: SimulatorConfiguration, logger: Logger = Logger(label: "hub-sim")) {
        self.configuration = configuration
        self.logger = logger
        family = FamilyStore(seed: configuration.seed, stateFile: configuration.stateFile)
        hub = Hub(logger: logger)
        faults.withLock { $0.fullPayload = configuration.fullTransactionPayload }
    }

    /// The hub methods clients may call are in HubSocket.swift: Echo, Add, Fail, Void, Hang, GetConnectionId,
    /// Silence(ms), AddTransaction, and the stream Counter(count, delayMs).
    ///
    /// Runs until cancelled. `onListening` gets the base URL once connections are accepted.
    public func run(onListening: @escaping @Sendable (String) async -> Void) async throws {
        let app = Application(
            router: restRouter(),
            server: .http1WebSocketUpgrade(webSocketRouter: hubRouter()),
            configuration: .init(address: .hostname(configuration.host, port: configuration.port), serverName: "allowance-hub-sim"),
            onServerRunning: { [configuration] channel in
                let port = channel.localAddress?.port ?? configuration.port
                await onListening("http://\(configuration.host):\(port)")
            },
            logger: logger
        )
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await app.runService() }
            group.addTask { try await self.generateActivity() }
            try await group.next()
            group.cancelAll()
        }
    }

    // MARK: - Auth

    func isValid(_ token: String?) -> Bool {
        guard let token, !token.isEmpty else { return false }
        if token == configuration.token { return !faults.withLock { $0.staticTokenRevoked } }
        return tokens.withLock { t in
            guard let expiry = t[token] else { return false }
            return expiry > .now
        }
    }

    func bearer(_ request: Request) -> String? {
        if let h = request.headers[.authorization], h.hasPrefix("Bearer ") { return String(h.dropFirst(7)) }
        return request.uri.queryParameters["access_token"].map(String.init)
    }

    // MARK: - Transactions

    func createTransaction(
        childId: UUID, amount: Decimal, type: String, description: String, by: String, idempotencyKey: String?
    ) async throws(APIFailure) -> SimTransaction {
        let (t, isNew) = try await family.addTransaction(
            childId: childId, amount: amount, type: type, description: description, by: by, idempotencyKey: idempotencyKey)
        if isNew {
            let full = faults.withLock { $0.fullPayload }
            await hub.broadcast("TransactionCreated", [full ? SimJSON.value(t) : .string(t.id.uuidString)])
            await hub.broadcast("BalanceUpdated", [.string(t.childId.uuidString), .number("\(t.balanceAfter)")])
            logger.info("transaction \(t.type) \(t.amount) for \(t.childId): balance \(t.balanceAfter)")
        }
        return t
    }

    func generate(_ count: Int) async {
        for _ in 0..<count {
            let a = await family.randomActivity()
            _ = try? await createTransaction(
                childId: a.childId, amount: a.amount, type: a.type, description: a.description, by: "Simulator",
                idempotencyKey: nil)
        }
    }

    private func generateActivity() async throws {
        if configuration.burst > 0 {
            // Give the first clients a moment to connect before the burst.
            try await Task.sleep(for: .milliseconds(200))
            await generate(configuration.burst)
        }
        guard configuration.activityRate > 0 else {
            try await Task.sleep(for: .seconds(86400 * 365))
            return
        }
        let interval = Duration.seconds(1 / configuration.activityRate)
        while !Task.isCancelled {
            try await Task.sleep(for: interval)
            if !isDown { await generate(1) }  // a backend that is down takes no transactions
        }
    }

    // MARK: - REST

    private func restRouter() -> Router<BasicRequestContext> {
        let router = Router()
        let api = router.group("api/v1")
        api.post("auth/login") { request, context in
            if self.isDown { return self.problem(503, "The backend is down (simulated).") }
            let body = try await self.jsonBody(request, context)
            guard body["email"]?.stringValue == "parent@example.com", body["password"]?.stringValue == "allowance" else {
                return self.problem(401, "Invalid email or password.")
            }
            let token = "sim-" + UUID().uuidString
            self.logins.add(1, ordering: .relaxed)
            let lifetime = self.faults.withLock { $0.tokenLifetime } ?? self.configuration.tokenLifetime
            self.tokens.withLock { $0[token] = .now + lifetime }
            let expires = Date().addingTimeInterval(Double(lifetime.components.seconds) + Double(lifetime.components.attoseconds) / 1e18)
            return self.json(
                200,
                JSONValue.object([
                    ("userId", "00000000-0000-4000-8000-000000000001"), ("email", "parent@example.com"),
                    ("firstName", "Pat"), ("lastName", "Example"), ("role", "Parent"),
                    ("familyId", "00000000-0000-4000-8000-0000000000f0"), ("familyName", "The Examples"),
                    ("token", .string(token)),
                    ("expiresAt", .string(Date.ISO8601FormatStyle(includingFractionalSeconds: true).format(expires))),
                ]))
        }
        api.get("auth/me") { request, _ in
            if self.isDown { return self.problem(503, "The backend is down (simulated).") }
            guard self.isValid(self.bearer(request)) else { return self.problem(401, "A valid bearer token is required.") }
            return self.json(
                200,
                JSONValue.object([
                    ("userId", "00000000-0000-4000-8000-000000000001"), ("email", "parent@example.com"), ("role", "Parent"),
                    ("familyId", "00000000-0000-4000-8000-0000000000f0"),
                ]))
        }
        api.get("children") { request, _ in
            self.childrenRequests.add(1, ordering: .relaxed)
            if let r = try await self.restGate(request) { return r }
            return self.json(200, SimJSON.value(await self.family.children))
        }
        api.get("children/:id") { request, context in
            if let r = try await self.restGate(request) { return r }
            guard let id = UUID(uuidString: context.parameters.get("id") ?? ""), let child = await self.family.child(id) else {
                return self.problem(404, "Child not found.")
            }
            return self.json(200, SimJSON.value(child))
        }
        // The API's one delete: a child with its history (a parent removed them from the family).
        api.delete("children/:id") { request, context in
            if let r = try await self.restGate(request) { return r }
            guard let id = UUID(uuidString: context.parameters.get("id") ?? ""), await self.family.removeChild(id) else {
                return self.problem(404, "Child not found.")
            }
            self.logger.notice("child \(id) deleted")
            return Response(status: .noContent)
        }
        // Newest first with limit/offset (as the app uses it), or, with `after=<sequence>`, oldest first from
        // that cursor: {"items":[...],"nextCursor":"<sequence of the last item>"} (the catch-up form).
        api.get("children/:id/transactions") { request, context in
            if let r = try await self.restGate(request) { return r }
            guard let id = UUID(uuidString: context.parameters.get("id") ?? ""), await self.family.child(id) != nil else {
                return self.problem(404, "Child not found.")
            }
            let q = request.uri.queryParameters
            let limit = min(max(Int(q["limit"].map(String.init) ?? "") ?? 50, 1), 500)
            let all = await self.family.transactions.filter { $0.childId == id }
            if let after = q["after"].map(String.init) {
                guard let cursor = Int(after), cursor >= 0 else { return self.problem(400, "after must be a sequence number.") }
                let page = Array(all.filter { $0.sequence > cursor }.prefix(limit))
                let next = page.last?.sequence ?? cursor
                return self.json(200, JSONValue.object([("items", SimJSON.value(page)), ("nextCursor", .string(String(next)))]))
            }
            let (cap, mode, bad) = self.faults.withLock { ($0.pageCap, $0.pageMode, $0.badRows[id] ?? []) }  // bad: oldest first
            let size = min(limit, cap ?? limit)
            let offset = mode == "ignore-offset" ? 0 : max(Int(q["offset"].map(String.init) ?? "") ?? 0, 0)
            if mode == "endless" {
                let fresh: [JSONValue] = (0..<size).map { _ in
                    JSONValue.object([
                        ("id", .string(UUID().uuidString.lowercased())), ("childId", .string(id.uuidString.lowercased())),
                        ("amount", .number("1")), ("type", "Credit"), ("description", "more"), ("balanceAfter", .number("1")),
                        ("createdAt", .string(Date.ISO8601FormatStyle(includingFractionalSeconds: true).format(Date()))),
                        ("createdByName", "Simulator"),
                    ])
                }
                return self.json(200, .array(fresh))
            }
            guard !bad.isEmpty else {
                return self.json(200, SimJSON.value(Array(all.reversed().dropFirst(offset).prefix(size))))
            }
            // The bad rows in their place in time among the real ones; only the page is encoded.
            var oldestFirst: [Either] = []
            var waiting = bad[...]
            for t in all {
                while let b = waiting.first, b.after < t.sequence {
                    oldestFirst.append(.row(b.row))
                    waiting = waiting.dropFirst()
                }
                oldestFirst.append(.transaction(t))
            }
            oldestFirst += waiting.map { .row($0.row) }
            let page = oldestFirst.reversed().dropFirst(offset).prefix(size)
            return self.json(200, .array(page.map { if case .row(let r) = $0 { r } else if case .transaction(let t) = $0 { SimJSON.value(t) } else { .null } }))
        }
        api.post("transactions") { request, context in
            if let r = try await self.restGate(request) { return r }
            let body: JSONValue
            do { body = try await self.jsonBody(request, context) } catch { return self.problem(400, "The body is not valid JSON.") }
            guard let childText = body["childId"]?.stringValue, let childId = UUID(uuidString: childText) else {
                return self.problem(400, "childId is required and must be a UUID.")
            }
            guard case .number(let amountText) = body["amount"], let amount = Decimal(string: amountText, locale: Locale(identifier: "en_US_POSIX")) else {
                return self.problem(400, "amount is required and must be a JSON number.")
            }
            guard let type = body["type"]?.stringValue else { return self.problem(400, "type is required: \"Credit\" or \"Debit\".") }
            let description = body["description"]?.stringValue ?? ""
            do {
                let t = try await self.createTransaction(
                    childId: childId, amount: amount, type: type, description: description, by: "Parent",
                    idempotencyKey: request.headers.first { $0.name.canonicalName == "idempotency-key" }?.value)
                return self.json(201, SimJSON.value(t))
            } catch let error as APIFailure {
                return self.problem(error.status, error.message)
            }
        }
        router.post("hubs/family/negotiate") { request, _ in
            if self.isRefusing {
                return self.problem(503, "The hub is refusing connections (simulated outage).")
            }
            guard self.isValid(self.bearer(request)) else { return self.problem(401, "A valid bearer token is required.") }
            let version = Int(request.uri.queryParameters["negotiateVersion"].map(String.init) ?? "") ?? 0
            let stateful = request.uri.queryParameters["useStatefulReconnect"] == "true"
            let c = await self.hub.negotiate(version: version, stateful: stateful)
            return Response(
                status: .ok, headers: [.contentType: "application/json"],
                body: .init(byteBuffer: ByteBuffer(bytes: NegotiateResponse.encode(c))))
        }
        addFaultSwitches(router.group("_sim"))
        addBlastRoutes(router.group("_sim"))
        return router
    }

    /// Applies the REST fault switches; nil lets the request through.
    private func restGate(_ request: Request) async throws -> Response? {
        if isDown { return problem(503, "The backend is down (simulated: POST /_sim/up brings it back).") }
        let (mode, delay) = faults.withLock { f -> (String, Duration) in
            guard f.restCount > 0 else { return ("ok", .zero) }
            f.restCount -= 1
            return (f.restMode, f.slowDelay)
        }
        switch mode {
        case "fail": return problem(500, "Simulated server error.")
        case "slow": try await Task.sleep(for: delay)
        default:
            // mode=409, mode=429 ...: answer with that status (429 and 503 ask to wait 1 s, as servers do).
            if let code = Int(mode) {
                var response = problem(code, "Simulated HTTP \(code).")
                if code == 429 || code == 503 { response.headers[.retryAfter] = "1" }
                return response
            }
        }
        guard isValid(bearer(request)) else { return problem(401, "A valid bearer token is required.") }
        return nil
    }

    private func addFaultSwitches(_ sim: RouterGroup<BasicRequestContext>) {
        sim.post("drop") { request, _ in
            let forget = request.uri.queryParameters["forget"] == "true"
            self.logger.notice("fault: dropping all hub sockets\(forget ? " and forgetting their connections" : "")")
            await self.hub.dropAll(forget: forget)
            return self.json(200, ["dropped": true])
        }
        // The backend down and up, REST and hub together: how to try "backend down" with a relay.
        sim.post("down") { _, _ in
            self.logger.notice("fault: the backend is down (REST 503, hub refused) until POST /_sim/up")
            self.faults.withLock { $0.down = true }
            await self.hub.dropAll(forget: true)
            return self.json(200, ["down": true])
        }
        sim.post("up") { _, _ in
            self.logger.notice("the backend is up again")
            self.faults.withLock { $0.down = false }
            return self.json(200, ["down": false])
        }
        sim.post("refuse") { request, _ in
            let seconds = Double(request.uri.queryParameters["seconds"].map(String.init) ?? "") ?? 5
            self.logger.notice("fault: refusing hub connections for \(seconds) s")
            self.faults.withLock { $0.refuseUntil = .now + .seconds(seconds) }
            await self.hub.dropAll(forget: true)
            return self.json(200, ["refusingSeconds": .number(String(seconds))])
        }
        sim.post("close") { request, _ in
            let q = request.uri.queryParameters
            let allow = q["allowReconnect"] == "true"
            let error = q["error"].map(String.init)
            self.logger.notice("fault: Close(error: \(error ?? "-"), allowReconnect: \(allow)) to all")
            await self.hub.closeAll(error: error, allowReconnect: allow)
            return self.json(200, ["closed": true])
        }
        sim.post("malformed") { request, _ in
            let kind = request.uri.queryParameters["kind"].map(String.init) ?? "json"
            let good = JSONHubProtocol.encode(.invocation(.init(target: "SimNotice", arguments: ["after the bad one"])))
            let bad: [UInt8]
            switch kind {
            case "type": bad = Array(#"{"type":"one"}"#.utf8) + [0x1E]
            case "args": bad = JSONHubProtocol.encode(.invocation(.init(target: "BalanceUpdated", arguments: [42, "not money"])))
            case "unknown": bad = Array(#"{"type":99,"x":1}"#.utf8) + [0x1E]
            case "incomplete": bad = Array(#"{"type":6}"#.utf8)
            // Hostile input: each must cost one log line, not the process.
            case "deep": bad = Array(#"{"type":1,"target":"Deep","arguments":["#.utf8) + Array(repeating: 0x5B, count: 100_000) + [0x1E]
            case "utf8": bad = Array(#"{"type":1,"target":"SimNotice","arguments":[""#.utf8) + [0xC3, 0x28, 0xFF] + Array(#""]}"#.utf8) + [0x1E]
            // One 100 MB message: the client must refuse it at its size limit, not buffer it.
            case "huge": bad = Array(#"{"type":1,"target":"SimNotice","arguments":[""#.utf8) + [UInt8](repeating: 0x61, count: 100 << 20) + Array(#""]}"#.utf8) + [0x1E]
            case "completion": bad = Array(#"{"type":3,"invocationId":"nobody-asked","result":1}"#.utf8) + [0x1E]
            case "headers":
                let headers = (0..<10_000).map { #""h\#($0)":"\#(String(repeating: "v", count: 20))""# }.joined(separator: ",")
                bad = Array(#"{"type":1,"target":"Headers","arguments":[],"headers":{\#(headers)}}"#.utf8) + [0x1E]
            case "flood":
                // 10,000 messages in one frame, then the good one: all in order.
                bad = (0..<10_000).flatMap { JSONHubProtocol.encode(.invocation(.init(target: "SimFlood", arguments: [.number(String($0))]))) }
            default: bad = Array(#"{"type":1,"target":"Broken","arguments":[}"#.utf8) + [0x1E]
            }
            self.logger.notice("fault: sending a malformed frame (\(kind))")
            await self.hub.broadcast(raw: kind == "incomplete" ? good + bad : bad + good)
            return self.json(200, ["sent": .string(kind)])
        }
        // A webhook receiver for the demo: relay alerts can be pointed here and are logged.
        sim.post("webhook") { request, context in
            let body = try await request.body.collect(upTo: 1 << 20)
            let n = self.webhooks.add(1, ordering: .relaxed).newValue
            let type = (try? JSONValue(parsing: Array(body.readableBytesView)))?["type"]?.stringValue ?? "?"
            self.logger.notice("webhook #\(n) received: \(type) (webhook-id \(request.headers.first { $0.name.canonicalName == "webhook-id" }?.value ?? "-"))")
            return self.json(200, ["received": .number(String(n))])
        }
        sim.post("revoke") { request, _ in
            let count = self.tokens.withLock { t in
                defer { t.removeAll() }
                return t.count
            }
            let withStatic = request.uri.queryParameters["static"] == "true"
            if withStatic { self.faults.withLock { $0.staticTokenRevoked = true } }
            self.logger.notice("fault: revoking \(count) login token(s)\(withStatic ? " and the configured token" : "")")
            return self.json(200, ["revoked": .number(String(count))])
        }
        sim.post("tokens") { request, _ in
            let q = request.uri.queryParameters
            let seconds = Double(q["lifetime"].map(String.init) ?? "")
            let close = q["closeOnExpiry"] == "true"
            self.faults.withLock { f in
                f.tokenLifetime = seconds.map { .milliseconds(Int($0 * 1000)) }
                f.closeOnTokenExpiry = close
            }
            self.logger.notice("fault: login tokens live \(seconds.map { "\($0) s" } ?? "as configured")\(close ? ", connections end when theirs expires" : "")")
            return self.json(200, ["closeOnExpiry": .bool(close)])
        }
        // The backend restored from an older backup: only the family's first `keep` transactions survive, and each
        // child's balance is what it was after its last surviving one. Nothing is broadcast (a restore is silent).
        sim.post("restore") { request, _ in
            let keep = Int(request.uri.queryParameters["keep"].map(String.init) ?? "") ?? 0
            let dropped = await self.family.restore(keepingFirst: keep)
            self.logger.notice("fault: restored from a backup: \(dropped) transaction(s) lost")
            return self.json(200, ["lost": .number(String(dropped))])
        }
        // A server that changes a balance without a transaction (`?child=ID&balance=12.34`): nothing adds up after.
        sim.post("balance") { request, _ in
            let q = request.uri.queryParameters
            guard let id = UUID(uuidString: q["child"].map(String.init) ?? ""), let balance = Decimal(string: q["balance"].map(String.init) ?? ""),
                await self.family.setBalance(id, balance)
            else { return self.problem(400, "child=<id of a child> and balance=<amount> are required.") }
            self.logger.notice("fault: \(id)'s balance set to \(balance) without a transaction")
            return self.json(200, ["balance": .number("\(balance)")])
        }
        sim.post("burst") { request, _ in
            let count = Int(request.uri.queryParameters["count"].map(String.init) ?? "") ?? 10
            // `ms`: one transaction every this many milliseconds (a burst that lasts, for faults to land in).
            if let ms = Int(request.uri.queryParameters["ms"].map(String.init) ?? ""), ms > 0 {
                for _ in 0..<count {
                    await self.generate(1)
                    try await Task.sleep(for: .milliseconds(ms))
                }
            } else {
                await self.generate(count)
            }
            return self.json(200, ["generated": .number(String(count))])
        }
        sim.post("rest") { request, _ in
            let q = request.uri.queryParameters
            let mode = q["mode"].map(String.init) ?? "ok"
            let count = Int(q["count"].map(String.init) ?? "") ?? 1
            let delay = Int(q["ms"].map(String.init) ?? "").map { Duration.milliseconds($0) } ?? .seconds(5)
            self.faults.withLock { f in
                f.restMode = mode
                f.restCount = count
                f.slowDelay = delay
            }
            return self.json(200, ["mode": .string(mode), "count": .number(String(count))])
        }
        // Paging as a careless server does it: ?cap=50 (pages never longer), &mode=ignore-offset|endless|ok.
        sim.post("pages") { request, _ in
            let q = request.uri.queryParameters
            let cap = q["cap"].flatMap { Int(String($0)) }
            let mode = q["mode"].map(String.init) ?? "ok"
            self.faults.withLock {
                $0.pageCap = cap
                $0.pageMode = mode
            }
            return self.json(200, ["cap": cap.map { .number(String($0)) } ?? .null, "mode": .string(mode)])
        }
        // A row no real server should send, for a child: ?child=ID&amount=0&createdAt=2026-02-30T10:00:00Z
        // (&balanceAfter=, &id=). REST only: the hub does not announce it.
        sim.post("badrow") { request, _ in
            let q = request.uri.queryParameters
            guard let child = q["child"].flatMap({ UUID(uuidString: String($0)) }) else { return self.problem(400, "child=ID is required.") }
            let row = JSONValue.object([
                ("id", .string(q["id"].map(String.init) ?? UUID().uuidString.lowercased())), ("childId", .string(child.uuidString.lowercased())),
                ("amount", .number(q["amount"].map(String.init) ?? "1")), ("type", "Debit"), ("description", "bad row"),
                ("balanceAfter", .number(q["balanceAfter"].map(String.init) ?? "1")),
                ("createdAt", .string(q["createdAt"].map(String.init) ?? Date.ISO8601FormatStyle(includingFractionalSeconds: true).format(Date()))),
                ("createdByName", "Simulator"),
            ])
            let after = await self.family.transactions.count
            self.faults.withLock { $0.badRows[child, default: []].append((after, row)) }
            return self.json(200, row)
        }
        sim.post("flap") { request, _ in
            let mode = request.uri.queryParameters["mode"].map(String.init)
            self.faults.withLock { $0.flap = mode == "off" ? nil : mode }
            return self.json(200, ["flap": .string(mode ?? "off")])
        }
        sim.post("payload") { request, _ in
            let full = request.uri.queryParameters["mode"] != "id"
            self.faults.withLock { $0.fullPayload = full }
            return self.json(200, ["transactionCreated": full ? "full" : "id"])
        }
        sim.post("invoke") { request, _ in
            let target = request.uri.queryParameters["target"].map(String.init) ?? "GetStatus"
            let answers = await self.hub.invokeClients(target, [])
            return self.json(200, .array(answers.map { a in
                switch a.outcome {
                case .result(let v): return .object([("result", v)])
                case .error(let e): return .object([("error", .string(e))])
                case .void: return .object([])
                }
            }))
        }
        sim.get("stats") { _, _ in
            let clients = await self.hub.connected
            let total = await self.hub.totalConnections
            return self.json(200, .object([
                ("connections", .number(String(clients.count))),
                ("totalConnections", .number(String(total))),
                ("transactions", .number(String(await self.family.transactions.count))),
                ("canceledStreams", .number(String(await self.hub.canceledStreams))),
                ("negotiations", .number(String(await self.hub.negotiations))),
                ("logins", .number(String(self.logins.load(ordering: .relaxed)))),
                ("childrenRequests", .number(String(self.childrenRequests.load(ordering: .relaxed)))),
                ("webhooksReceived", .number(String(self.webhooks.load(ordering: .relaxed)))),
                ("reattachments", .number(String(await self.hub.reattachments))),
                ("clients", .array(clients.map { c in
                    let s = c.snapshot
                    return .object([
                        ("connectionId", .string(c.connectionId)),
                        ("pingsReceived", .number(String(s.pingsReceived))),
                        ("messagesReceived", .number(String(s.messagesReceived))),
                    ])
                })),
            ]))
        }
    }

    // MARK: - Helpers

    /// The connection opened with `token` must end now (the token expired and the switch says so).
    func mustCloseForExpiry(_ token: String?) -> Bool {
        faults.withLock { $0.closeOnTokenExpiry } && !isValid(token)
    }

    /// The "refuse" fault switch is on.
    var flapMode: String? { faults.withLock { $0.flap } }

    /// A page item: a real transaction or an injected bad row.
    private enum Either {
        case transaction(SimTransaction)
        case row(JSONValue)
    }

    var isRefusing: Bool { faults.withLock { f in f.down || f.refuseUntil.map { $0 > .now } ?? false } }
    /// `POST /_sim/down` until `POST /_sim/up`: REST and the hub both.
    var isDown: Bool { faults.withLock { $0.down } }

    func jsonBody(_ request: Request, _ context: BasicRequestContext) async throws -> JSONValue {
        let buffer = try await request.body.collect(upTo: 1 << 20)
        return try JSONValue(parsing: Array(buffer.readableBytesView))
    }

    func json(_ status: Int, _ value: JSONValue) -> Response {
        var out: [UInt8] = []
        value.write(into: &out)
        return Response(
            status: .init(code: status), headers: [.contentType: "application/json"],
            body: .init(byteBuffer: ByteBuffer(bytes: out)))
    }

    func problem(_ status: Int, _ message: String) -> Response {
        json(status, .object([("status", .number(String(status))), ("error", .string(message))]))
    }
}

