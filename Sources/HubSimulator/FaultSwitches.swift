import Foundation
import Hummingbird
import NIOCore

extension HubSimulator {
    /// `POST /_sim/...`: the switches that make the backend misbehave as real ones do (drops, outages, refusals,
    /// malformed frames, revoked tokens, bursts, bad rows), and `GET /_sim/stats`. Every one answers JSON.
    func faultSwitches() -> RouteCollection<BasicRequestContext> {
        let sim = RouteCollection(context: BasicRequestContext.self)
        // `before=N`: N transactions sent right before the cut, so no client can have acknowledged them (a client
        // acknowledges about a second after receipt); `detached=N`: N sent right after it, before any can re-attach.
        // A test then knows what a stateful re-attach must replay, however slowly its own steps run.
        sim.post("drop") { request, _ in
            let q = request.uri.queryParameters
            let forget = q["forget"] == "true"
            let before = q["before"].flatMap { Int(String($0)) } ?? 0
            let detached = q["detached"].flatMap { Int(String($0)) } ?? 0
            self.logger.notice("fault: dropping all hub sockets\(forget ? " and forgetting their connections" : "")")
            await self.generate(before)
            await self.hub.dropAll(forget: forget)
            await self.generate(detached)
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
        // What negotiate offers and which protocol is required, as servers are set up: `offer=LongPolling` is a server
        // with WebSockets and Server-Sent Events off; `require=messagepack` refuses JSON handshakes.
        sim.post("transports") { request, _ in
            let q = request.uri.queryParameters
            let known = ["WebSockets", "ServerSentEvents", "LongPolling"]
            let (offered, required) = self.faults.withLock { f -> ([String], Bool) in
                if let offer = q["offer"] {
                    f.transports = offer.split(separator: ",").map(String.init).filter(known.contains)
                }
                if let require = q["require"] { f.requireMessagePack = require == "messagepack" }
                return (f.transports, f.requireMessagePack)
            }
            if q["offer"] != nil { await self.hub.dropAll(forget: true) }
            self.logger.notice(
                "negotiate offers \(offered.joined(separator: ", "))\(required ? "; MessagePack required" : "")")
            return self.json(
                200, ["offered": .array(offered.map(SimValue.string)), "requireMessagePack": .bool(required)])
        }
        // A hub without `[Authorize]`: its connection endpoint (polls, sends, event streams) takes requests without a
        // token; negotiate and REST still want one.
        sim.post("auth") { request, _ in
            let open = request.uri.queryParameters["hub"] == "open"
            self.faults.withLock { $0.openHub = open }
            return self.json(200, ["openHub": .bool(open)])
        }
        // WebSockets offered by negotiate but every upgrade refused: a proxy that strips `Upgrade`.
        sim.post("upgrades") { request, _ in
            let refuse = request.uri.queryParameters["refuse"] == "true"
            self.logger.notice(
                "WebSocket upgrades are \(refuse ? "refused (as behind a proxy that strips them)" : "accepted")")
            self.faults.withLock { $0.refuseUpgrades = refuse }
            return self.json(200, ["refusingUpgrades": .bool(refuse)])
        }
        sim.post("refuse") { request, _ in
            let seconds = Double(request.uri.queryParameters["seconds"].map(String.init) ?? "") ?? 5
            self.logger.notice("fault: refusing hub connections for \(seconds) s")
            self.faults.withLock { $0.refuseUntil = .now + .seconds(seconds) }
            await self.hub.dropAll(forget: true)
            return self.json(200, ["refusingSeconds": .number(Decimal(seconds))])
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
            let good = SimJSONHubProtocol.encode(
                .invocation(.init(target: "SimNotice", arguments: ["after the bad one"])))
            let bad: [UInt8]
            switch kind {
            case "type": bad = Array(#"{"type":"one"}"#.utf8) + [0x1E]
            case "args":
                bad = SimJSONHubProtocol.encode(
                    .invocation(.init(target: "BalanceUpdated", arguments: [42, "not money"])))
            case "unknown": bad = Array(#"{"type":99,"x":1}"#.utf8) + [0x1E]
            case "incomplete": bad = Array(#"{"type":6}"#.utf8)
            // Hostile input: each must cost one log line, not the process.
            case "deep":
                bad =
                    Array(#"{"type":1,"target":"Deep","arguments":["#.utf8) + Array(repeating: 0x5B, count: 100_000) + [
                        0x1E
                    ]
            case "utf8":
                bad =
                    Array(#"{"type":1,"target":"SimNotice","arguments":[""#.utf8) + [0xC3, 0x28, 0xFF]
                    + Array(#""]}"#.utf8) + [0x1E]
            // One 100 MB message: the client must refuse it at its size limit, not buffer it.
            case "huge":
                bad =
                    Array(#"{"type":1,"target":"SimNotice","arguments":[""#.utf8)
                    + [UInt8](repeating: 0x61, count: 100 << 20) + Array(#""]}"#.utf8) + [0x1E]
            case "completion": bad = Array(#"{"type":3,"invocationId":"nobody-asked","result":1}"#.utf8) + [0x1E]
            case "headers":
                let headers = (0..<10_000).map { #""h\#($0)":"\#(String(repeating: "v", count: 20))""# }.joined(
                    separator: ",")
                bad = Array(#"{"type":1,"target":"Headers","arguments":[],"headers":{\#(headers)}}"#.utf8) + [0x1E]
            case "flood":
                // 10,000 messages in one frame, then the good one: all in order.
                bad = (0..<10_000).flatMap {
                    SimJSONHubProtocol.encode(.invocation(.init(target: "SimFlood", arguments: [.number(Decimal($0))])))
                }
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
            let type = (try? SimJSON.parse(Array(body.readableBytesView)))?["type"]?.stringValue ?? "?"
            self.logger.notice(
                "webhook #\(n) received: \(type) (webhook-id \(request.headers.first { $0.name.canonicalName == "webhook-id" }?.value ?? "-"))"
            )
            return self.json(200, ["received": .number(Decimal(n))])
        }
        sim.post("revoke") { request, _ in
            let count = self.tokens.withLock { t in
                defer { t.removeAll() }
                return t.count
            }
            let withStatic = request.uri.queryParameters["static"] == "true"
            if withStatic { self.faults.withLock { $0.staticTokenRevoked = true } }
            self.logger.notice(
                "fault: revoking \(count) login token(s)\(withStatic ? " and the configured token" : "")")
            return self.json(200, ["revoked": .number(Decimal(count))])
        }
        sim.post("tokens") { request, _ in
            let q = request.uri.queryParameters
            let seconds = Double(q["lifetime"].map(String.init) ?? "")
            let close = q["closeOnExpiry"] == "true"
            // ASP.NET Core 11's EnableAuthenticationRefresh: negotiate reports the token's lifetime and
            // `POST /hubs/family/refresh?id=` takes a fresh token for a live connection.
            let refresh = q["refresh"] == "true"
            let failures = q["refreshFailures"].flatMap { Int($0) } ?? 0
            self.faults.withLock { f in
                f.tokenLifetime = seconds.map { .milliseconds(Int($0 * 1000)) }
                f.closeOnTokenExpiry = close
                f.authRefresh = refresh
                f.refreshFailures = failures
            }
            self.logger.notice(
                "fault: login tokens live \(seconds.map { "\($0) s" } ?? "as configured")\(close ? ", connections end when theirs expires" : "")\(refresh ? ", refresh offered" : "")"
            )
            return self.json(200, ["closeOnExpiry": .bool(close), "refresh": .bool(refresh)])
        }
        // The backend restored from an older backup: only the family's first `keep` transactions survive, and each
        // child's balance is what it was after its last surviving one. Nothing is broadcast (a restore is silent).
        sim.post("restore") { request, _ in
            let keep = Int(request.uri.queryParameters["keep"].map(String.init) ?? "") ?? 0
            let dropped = await self.family.restore(keepingFirst: keep)
            self.logger.notice("fault: restored from a backup: \(dropped) transaction(s) lost")
            return self.json(200, ["lost": .number(Decimal(dropped))])
        }
        // A server that changes a balance without a transaction (`?child=ID&balance=12.34`): nothing adds up after.
        sim.post("balance") { request, _ in
            let q = request.uri.queryParameters
            guard let id = UUID(uuidString: q["child"].map(String.init) ?? ""),
                let balance = Decimal(string: q["balance"].map(String.init) ?? ""),
                await self.family.setBalance(id, balance)
            else { return self.problem(400, "child=<id of a child> and balance=<amount> are required.") }
            self.logger.notice("fault: \(id)'s balance set to \(balance) without a transaction")
            return self.json(200, ["balance": .number(balance)])
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
            return self.json(200, ["generated": .number(Decimal(count))])
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
            return self.json(200, ["mode": .string(mode), "count": .number(Decimal(count))])
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
            return self.json(200, ["cap": cap.map { .number(Decimal($0)) } ?? .null, "mode": .string(mode)])
        }
        // A row no real server should send, for a child: ?child=ID&amount=0&createdAt=2026-02-30T10:00:00Z
        // (&balanceAfter=, &id=). REST only: the hub does not announce it.
        sim.post("badrow") { request, _ in
            let q = request.uri.queryParameters
            guard let child = q["child"].flatMap({ UUID(uuidString: String($0)) }) else {
                return self.problem(400, "child=ID is required.")
            }
            guard let amount = Decimal(string: q["amount"].map(String.init) ?? "1"),
                let balanceAfter = Decimal(string: q["balanceAfter"].map(String.init) ?? "1")
            else { return self.problem(400, "amount= and balanceAfter= must be numbers.") }
            let id: String = q["id"].map(String.init) ?? UUID().uuidString.lowercased()
            let createdAt: String =
                q["createdAt"].map(String.init)
                ?? Date.ISO8601FormatStyle(includingFractionalSeconds: true).format(Date())
            let row: SimValue = [
                "id": .string(id), "childId": .string(child.uuidString.lowercased()), "amount": .number(amount),
                "type": "Debit",
                "description": "bad row", "balanceAfter": .number(balanceAfter), "createdAt": .string(createdAt),
                "createdByName": "Simulator",
            ]
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
            return self.json(
                200,
                .array(
                    answers.map { a in
                        switch a {
                        case .result(let v): return ["result": v]
                        case .error(let e): return ["error": .string(e)]
                        case .void: return .object([])
                        }
                    }))
        }
        sim.get("stats") { _, _ in
            let clients = await self.hub.connected
            let total = await self.hub.totalConnections
            return self.json(
                200,
                [
                    "connections": .number(Decimal(clients.count)),
                    "totalConnections": .number(Decimal(total)),
                    "transactions": .number(Decimal(await self.family.transactions.count)),
                    "canceledStreams": .number(Decimal(await self.hub.canceledStreams)),
                    "canceledInvocations": .number(Decimal(await self.hub.canceledInvocations)),
                    "negotiations": .number(Decimal(await self.hub.negotiations)),
                    "logins": .number(Decimal(self.logins.load(ordering: .relaxed))),
                    "childrenRequests": .number(Decimal(self.childrenRequests.load(ordering: .relaxed))),
                    "webhooksReceived": .number(Decimal(self.webhooks.load(ordering: .relaxed))),
                    "reattachments": .number(Decimal(await self.hub.reattachments)),
                    "replayed": .number(Decimal(clients.reduce(0) { $0 + $1.snapshot.replayed })),
                    "refreshes": .number(Decimal(self.refreshes.load(ordering: .relaxed))),
                    "clients": .array(
                        clients.map { c in
                            let s = c.snapshot
                            return [
                                "connectionId": .string(c.connectionId),
                                "pingsReceived": .number(Decimal(s.pingsReceived)),
                                "messagesReceived": .number(Decimal(s.messagesReceived)),
                                "unacknowledged": .number(Decimal(s.unacknowledged)),
                            ] as SimValue
                        }),
                ])
        }
        return sim
    }
}
