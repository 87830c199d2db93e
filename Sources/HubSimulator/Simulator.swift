import Foundation
import Hummingbird
import HummingbirdWebSocket
import Logging
import NIOCore
import Synchronization

/// The stand-in Allowance Tracker backend: REST under /api/v1, the hub at /hubs/family, switches under /_sim/.
public final class HubSimulator: Sendable {
    public let configuration: SimulatorConfiguration
    let family: FamilyStore
    let hub: Hub
    let logger: Logger
    let faults = Mutex(Faults())
    let tokens = Mutex<[String: ContinuousClock.Instant]>([:])
    let logins = Atomic<Int>(0)
    let webhooks = Atomic<Int>(0)
    /// `GET /api/v1/children`: every catch-up starts with one.
    let childrenRequests = Atomic<Int>(0)
    /// Successful authentication refreshes.
    let refreshes = Atomic<Int>(0)
    let blast = BlastState()
    /// The token each connection was last authenticated with (at negotiate, or by a refresh), by connection token.
    let connectionBearers = Mutex<[String: String]>([:])
    /// Connections over Server-Sent Events or Long Polling, by connection token.
    let httpLinks = Mutex<[String: HTTPLink]>([:])

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
        /// Authentication refresh offered (`POST /_sim/tokens?refresh=true`).
        var authRefresh = false
        /// The next this many refreshes fail with 503 (`refreshFailures=N`), as a refresh meeting a restarting server.
        var refreshFailures = 0
        /// A server that returns at most this many transactions per page, whatever `limit` asked.
        var pageCap: Int?
        /// "ok"; "ignore-offset": every page is the first one; "endless": every page is new transactions.
        var pageMode = "ok"
        /// Rows no real server should send (an amount of 0, three decimals, a date in the future), per child, each
        /// after the family's first `after` transactions: `POST /_sim/badrow`.
        var badRows: [UUID: [(after: Int, row: SimValue)]] = [:]
        /// A hub that ends every connection right after its handshake: "close" (Close with allowReconnect) or
        /// "malformed" (a frame that is not JSON). `POST /_sim/flap?mode=`.
        var flap: String?
        /// The whole backend is down: REST answers 503, the hub refuses, no activity.
        var down = false
        /// The transports negotiate offers (`POST /_sim/transports?offer=WebSockets,LongPolling`).
        var transports: [String] = []
        /// Only MessagePack clients get in (`POST /_sim/transports?require=messagepack`).
        var requireMessagePack = false
        /// The hub's connection endpoint takes requests without a token (`POST /_sim/auth?hub=open`).
        var openHub = false
        /// WebSocket upgrades refused while negotiate still offers WebSockets (`POST /_sim/upgrades?refuse=true`).
        var refuseUpgrades = false
        /// The configured bearer token is no longer accepted (`POST /_sim/revoke?static=true`): a token rotated on
        /// the server.
        var staticTokenRevoked = false
    }

    public init(configuration: SimulatorConfiguration, logger: Logger = Logger(label: "hub-sim")) {
        self.configuration = configuration
        self.logger = logger
        family = FamilyStore(
            seed: configuration.seed, stateFile: configuration.stateFile,
            extraChildren: max(0, configuration.children - 3),
            history: configuration.history)
        hub = Hub(logger: logger)
        faults.withLock { f in
            f.fullPayload = configuration.fullTransactionPayload
            f.transports = configuration.transports
            f.requireMessagePack = configuration.requireMessagePack
        }
    }

    /// The hub methods clients may call are in HubSocket.swift: Echo, Add, Fail, Void, Hang, GetConnectionId,
    /// Silence(ms), AddTransaction, and the stream Counter(count, delayMs).
    ///
    /// Runs until cancelled. `onListening` gets the base URL once connections are accepted.
    public func run(onListening: @escaping @Sendable (String) async -> Void) async throws {
        let app = Application(
            router: restRouter(),
            server: .http1WebSocketUpgrade(webSocketRouter: hubRouter()),
            configuration: .init(
                address: .hostname(configuration.host, port: configuration.port), serverName: "allowance-hub-sim"),
            onServerRunning: { [configuration] channel in
                let port = channel.localAddress?.port ?? configuration.port
                await onListening("http://\(configuration.host):\(port)")
            },
            logger: logger
        )
        try await withThrowingTaskGroup(of: Void.self) { group in
            // No graceful shutdown on signals: it would wait for every event stream and held poll to end. The
            // simulator holds nothing unsaved; its command exits at once on SIGTERM and SIGINT.
            group.addTask { try await app.runService(gracefulShutdownSignals: []) }
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
            childId: childId, amount: amount, type: type, description: description, by: by,
            idempotencyKey: idempotencyKey)
        if isNew {
            let full = faults.withLock { $0.fullPayload }
            await hub.broadcast("TransactionCreated", [full ? SimJSON.value(t) : .string(t.id.uuidString)])
            await hub.broadcast("BalanceUpdated", [.string(t.childId.uuidString), .number(t.balanceAfter)])
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
            guard body["email"]?.stringValue == "parent@example.com", body["password"]?.stringValue == "allowance"
            else {
                return self.problem(401, "Invalid email or password.")
            }
            let token = "sim-" + UUID().uuidString
            self.logins.add(1, ordering: .relaxed)
            let lifetime = self.faults.withLock { $0.tokenLifetime } ?? self.configuration.tokenLifetime
            self.tokens.withLock { $0[token] = .now + lifetime }
            let expires = Date().addingTimeInterval(
                Double(lifetime.components.seconds) + Double(lifetime.components.attoseconds) / 1e18)
            return self.json(
                200,
                [
                    "userId": "00000000-0000-4000-8000-000000000001", "email": "parent@example.com",
                    "firstName": "Pat", "lastName": "Example", "role": "Parent",
                    "familyId": "00000000-0000-4000-8000-0000000000f0", "familyName": "The Examples",
                    "token": .string(token),
                    "expiresAt": .string(Date.ISO8601FormatStyle(includingFractionalSeconds: true).format(expires)),
                ])
        }
        api.get("auth/me") { request, _ in
            if self.isDown { return self.problem(503, "The backend is down (simulated).") }
            guard self.isValid(self.bearer(request)) else {
                return self.problem(401, "A valid bearer token is required.")
            }
            return self.json(
                200,
                [
                    "userId": "00000000-0000-4000-8000-000000000001", "email": "parent@example.com", "role": "Parent",
                    "familyId": "00000000-0000-4000-8000-0000000000f0",
                ])
        }
        api.get("children") { request, _ in
            self.childrenRequests.add(1, ordering: .relaxed)
            if let r = try await self.restGate(request) { return r }
            return self.json(200, .array(await self.family.children.map(SimJSON.value)))
        }
        api.get("children/:id") { request, context in
            if let r = try await self.restGate(request) { return r }
            guard let id = UUID(uuidString: context.parameters.get("id") ?? ""), let child = await self.family.child(id)
            else {
                return self.problem(404, "Child not found.")
            }
            return self.json(200, SimJSON.value(child))
        }
        // The API's one delete: a child with its history (a parent removed them from the family).
        api.delete("children/:id") { request, context in
            if let r = try await self.restGate(request) { return r }
            guard let id = UUID(uuidString: context.parameters.get("id") ?? ""), await self.family.removeChild(id)
            else {
                return self.problem(404, "Child not found.")
            }
            self.logger.notice("child \(id) deleted")
            return Response(status: .noContent)
        }
        // Newest first with limit/offset (as the app uses it), or, with `after=<sequence>`, oldest first from
        // that cursor: {"items":[...],"nextCursor":"<sequence of the last item>"} (the catch-up form).
        api.get("children/:id/transactions") { request, context in
            if let r = try await self.restGate(request) { return r }
            guard let id = UUID(uuidString: context.parameters.get("id") ?? ""), await self.family.child(id) != nil
            else {
                return self.problem(404, "Child not found.")
            }
            let q = request.uri.queryParameters
            let limit = min(max(Int(q["limit"].map(String.init) ?? "") ?? 50, 1), 500)
            if let after = q["after"].map(String.init) {
                guard let cursor = Int(after), cursor >= 0 else {
                    return self.problem(400, "after must be a sequence number.")
                }
                let page = await self.family.transactions(of: id, after: cursor, limit: limit)
                let next = page.last?.sequence ?? cursor
                return self.json(200, ["items": .array(page.map(SimJSON.value)), "nextCursor": .string(String(next))])
            }
            // bad: oldest first
            let (cap, mode, bad) = self.faults.withLock { ($0.pageCap, $0.pageMode, $0.badRows[id] ?? []) }
            let size = min(limit, cap ?? limit)
            let offset = mode == "ignore-offset" ? 0 : max(Int(q["offset"].map(String.init) ?? "") ?? 0, 0)
            if mode == "endless" {
                let fresh: [SimValue] = (0..<size).map { _ in
                    [
                        "id": .string(UUID().uuidString.lowercased()), "childId": .string(id.uuidString.lowercased()),
                        "amount": 1, "type": "Credit", "description": "more", "balanceAfter": 1,
                        "createdAt": .string(Date.ISO8601FormatStyle(includingFractionalSeconds: true).format(Date())),
                        "createdByName": "Simulator",
                    ]
                }
                return self.json(200, .array(fresh))
            }
            guard !bad.isEmpty else {
                return self.json(
                    200,
                    .array(await self.family.newestTransactions(of: id, offset: offset, limit: size).map(SimJSON.value))
                )
            }
            let all = await self.family.transactions(of: id)
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
            return self.json(
                200,
                .array(
                    page.map {
                        if case .row(let r) = $0 {
                            r
                        } else if case .transaction(let t) = $0 {
                            SimJSON.value(t)
                        } else {
                            .null
                        }
                    }))
        }
        api.post("transactions") { request, context in
            if let r = try await self.restGate(request) { return r }
            let body: SimValue
            do { body = try await self.jsonBody(request, context) } catch {
                return self.problem(400, "The body is not valid JSON.")
            }
            guard let childText = body["childId"]?.stringValue, let childId = UUID(uuidString: childText) else {
                return self.problem(400, "childId is required and must be a UUID.")
            }
            guard case .number(let amount)? = body["amount"] else {
                return self.problem(400, "amount is required and must be a JSON number.")
            }
            guard let type = body["type"]?.stringValue else {
                return self.problem(400, "type is required: \"Credit\" or \"Debit\".")
            }
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
        wishListAndAnalyticsRoutes(api)
        router.post("hubs/family/negotiate") { request, _ in
            if self.isRefusing {
                return self.problem(503, "The hub is refusing connections (simulated outage).")
            }
            guard self.isValid(self.bearer(request)) else {
                return self.problem(401, "A valid bearer token is required.")
            }
            let version = Int(request.uri.queryParameters["negotiateVersion"].map(String.init) ?? "") ?? 0
            let stateful = request.uri.queryParameters["useStatefulReconnect"] == "true"
            let (offered, refresh) = self.faults.withLock { ($0.transports, $0.authRefresh) }
            var c = await self.hub.negotiate(version: version, stateful: stateful, transports: offered)
            let bearer = self.bearer(request)
            if let token = c.connectionToken, let bearer { self.connectionBearers.withLock { $0[token] = bearer } }
            if refresh, c.connectionToken != nil { c.tokenLifetimeSeconds = self.lifetimeSeconds(of: bearer) }
            return Response(
                status: .ok, headers: [.contentType: "application/json"],
                body: .init(byteBuffer: ByteBuffer(bytes: c.json)))
        }
        httpTransportRoutes(router)
        refreshRoute(router)
        router.addRoutes(faultSwitches(), atPath: "_sim")
        router.addRoutes(blastRoutes(), atPath: "_sim")
        return router
    }

    /// Applies the REST fault switches; nil lets the request through.
    func restGate(_ request: Request) async throws -> Response? {
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

    // MARK: - Helpers

    /// The connection opened with `token` must end now (the token expired and the switch says so).
    func mustCloseForExpiry(_ token: String?) -> Bool {
        faults.withLock { $0.closeOnTokenExpiry } && !isValid(token)
    }

    /// Whole seconds a login token has left; nil for the configured token, which does not expire.
    func lifetimeSeconds(of token: String?) -> Int? {
        guard let token, let expiry = tokens.withLock({ $0[token] }) else { return nil }
        return max(0, Int((expiry - .now).components.seconds))
    }

    /// `POST /hubs/family/refresh?id=`: a fresh token for a live connection (only while refresh is offered; a server
    /// without it has no such endpoint). Errors come as `{"error": ...}`, as ASP.NET Core writes them.
    func refreshRoute(_ router: Router<BasicRequestContext>) {
        router.post("hubs/family/refresh") { request, _ in
            guard self.faults.withLock({ $0.authRefresh }) else { return Response(status: .notFound) }
            let fails = self.faults.withLock { f in
                defer { f.refreshFailures = max(0, f.refreshFailures - 1) }
                return f.refreshFailures > 0
            }
            if fails { return Response(status: .serviceUnavailable) }
            guard let id = request.uri.queryParameters["id"].map(String.init),
                self.connectionBearers.withLock({ $0[id] }) != nil
            else {
                return self.json(404, ["error": "No Connection with that ID"])
            }
            let bearer = self.bearer(request)
            guard self.isValid(bearer), let bearer else {
                return self.json(401, ["error": "The refresh request is not authenticated."])
            }
            self.connectionBearers.withLock { $0[id] = bearer }
            self.refreshes.add(1, ordering: .relaxed)
            self.logger.info("refreshed a connection's token")
            let lifetime = self.lifetimeSeconds(of: bearer)
            return self.json(200, .object(lifetime.map { [("tokenLifetimeSeconds", .number(Decimal($0)))] } ?? []))
        }
    }

    /// The "refuse" fault switch is on.
    var flapMode: String? { faults.withLock { $0.flap } }

    /// Whether negotiate offers `transport` "WebSockets": "ServerSentEvents", "LongPolling".
    func offers(_ transport: String) -> Bool { faults.withLock { $0.transports.contains(transport) } }

    /// A WebSocket upgrade is refused: WebSockets not offered, or refused as a stripping proxy would.
    var refusesUpgrades: Bool { faults.withLock { !$0.transports.contains("WebSockets") || $0.refuseUpgrades } }

    /// Whether a handshake for the protocol `name` is accepted.
    func acceptsProtocol(_ name: String) -> Bool { faults.withLock { !$0.requireMessagePack || name == "messagepack" } }

    /// A page item: a real transaction or an injected bad row.
    private enum Either {
        case transaction(SimTransaction)
        case row(SimValue)
    }

    var isRefusing: Bool { faults.withLock { f in f.down || f.refuseUntil.map { $0 > .now } ?? false } }
    /// `POST /_sim/down` until `POST /_sim/up`: REST and the hub both.
    var isDown: Bool { faults.withLock { $0.down } }

    func jsonBody(_ request: Request, _ context: BasicRequestContext) async throws -> SimValue {
        let buffer = try await request.body.collect(upTo: 1 << 20)
        return try SimJSON.parse(Array(buffer.readableBytesView))
    }

    func json(_ status: Int, _ value: SimValue) -> Response {
        Response(
            status: .init(code: status), headers: [.contentType: "application/json"],
            body: .init(byteBuffer: ByteBuffer(bytes: value.bytes)))
    }

    func problem(_ status: Int, _ message: String) -> Response {
        json(status, ["status": .number(Decimal(status)), "error": .string(message)])
    }
}
