import Alerts
import AllowanceAPI
import Config
import Foundation
import GRDB
import Logging
import Relay
import SignalRProtocol
import Store
import Synchronization
import TestSupport
import Testing

/// The ledger and the sink workers against real HTTP receivers: what arrives, how often, and when.
@Suite(.serialized, .timeLimit(.minutes(1))) struct DeliveryTests {
    let logger: Logger = {
        var l = Logger(label: "relay-test")
        l.logLevel =
            ProcessInfo.processInfo.environment["ALLOWANCE_TEST_LOG"].flatMap(Logger.Level.init(rawValue:)) ?? .critical
        return l
    }()

    func store() throws -> Store {
        let s = try Store.open(
            path: FileManager.default.temporaryDirectory.appending(path: "alerts-\(UUID())/relay.sqlite").path)
        try s.storeCaughtUp(
            children: [Child(id: alice, firstName: "Alice", lastName: "E", weeklyAllowance: 10, currentBalance: 50)],
            transactions: [])
        return s
    }

    /// Runs the engine for `body` with the config (BASE_A, BASE_B: the receivers' URLs).
    func withRelay(
        _ yaml: String, _ a: WebhookReceiver, _ b: WebhookReceiver = WebhookReceiver(),
        _ body: (Store) async throws -> Void
    ) async throws {
        try await withRelay(yaml, a, b) { store, _ in try await body(store) }
    }

    func withRelay(
        _ yaml: String, _ a: WebhookReceiver, _ b: WebhookReceiver = WebhookReceiver(),
        _ body: (Store, RelayEngine) async throws -> Void
    ) async throws {
        try await a.run { baseA in
            try await b.run { baseB in
                let text = yaml.replacingOccurrences(of: "BASE_A", with: baseA.absoluteString).replacingOccurrences(
                    of: "BASE_B", with: baseB.absoluteString)
                let config = try AlertSettings.parse(text, file: "t.yaml")
                let store = try store()
                let engine = RelayEngine(store: store, config: config, logger: logger)
                try engine.install()
                let task = Task { await engine.run() }
                defer { task.cancel() }
                try await body(store, engine)
            }
        }
    }

    func live(_ store: Store, _ amount: String, after: String, _ description: String = "x") throws {
        let t = Transaction(
            id: UUID(), childId: alice, amount: Decimal(string: amount)!, type: .debit, description: description,
            balanceAfter: Decimal(string: after)!, createdAt: Date(), createdByName: "Pat")
        #expect(try store.apply(.transactionCreated(t)) != .duplicate)
    }

    /// Waits until the relay can send nothing more: every worker settled (nothing under way, every outcome written)
    /// and no row pending or in flight in the ledger. A duplicate would have arrived by then, so "nothing twice" is
    /// asserted after this rather than after a sleep that a late duplicate could outlast.
    func settled(_ engine: RelayEngine, _ store: Store) async throws {
        try await eventually("the relay to settle") {
            try engine.sinksAreSettled
                && store.deliveryCounts().values.allSatisfy { $0["pending"] == nil && $0["in_flight"] == nil }
        }
    }

    func eventually(_ what: String, timeout: Duration = .seconds(15), _ check: () throws -> Bool) async rethrows {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if try check() { return }
            try? await Task.sleep(for: .milliseconds(20))
        }
        Issue.record("timed out waiting for: \(what)")
    }

    /// Outcomes the ledger cannot write (a full disk, a locked file) are kept and written again after a pause: the
    /// alerts already sent are not sent again meanwhile (they were, as fast as the worker could, 2,000 times in a
    /// few seconds in a disk-full run), and once the write goes through every alert is delivered once.
    @Test func outcomesThatCannotBeWrittenAreKeptAndNotSentAgain() async throws {
        let hook = WebhookReceiver()
        try await hook.run { base in
            let config = try AlertSettings.parse(
                "sinks:\n  hook:\n    type: webhook\n    url: \(base.appending(path: "hook"))\n", file: "t.yaml")
            let store = try store()
            let ledger = RefusingLedger(store, refusals: 4)
            let engine = RelayEngine(store: store, config: config, ledger: ledger, logger: logger)
            try engine.install()
            let task = Task { await engine.run() }
            defer { task.cancel() }
            for i in 1...5 { try live(store, "1", after: String(50 - i)) }
            try await eventually("the ledger to take the outcomes") {
                try ledger.refused >= 4 && (store.deliveryCounts()["hook"]?["delivered"] ?? 0) == 5
            }
            try await settled(engine, store)
            #expect(
                hook.received.count == 5, "each alert sent once, though its outcome was refused \(ledger.refused) times"
            )
            #expect(Set(hook.received.compactMap { $0.headers["webhook-id"] }).count == 5)
        }
    }

    /// At a steady pace (each alert delivered before the next is planned), a sink that has sent everything due takes
    /// each new alert from the planner's hand-over and does not read it back from the ledger. It once asked seven
    /// times per alert, then once (each read is a SQLite transaction: at 20/s a large part of the relay's CPU).
    @Test func aSteadySinkTakesItsAlertsFromThePlannerWithoutReadingTheLedger() async throws {
        let hook = WebhookReceiver()
        try await hook.run { base in
            let config = try AlertSettings.parse(
                "sinks:\n  hook:\n    type: webhook\n    url: \(base.appending(path: "hook"))\n", file: "t.yaml")
            let store = try store()
            let ledger = CountingLedger(store)
            let engine = RelayEngine(store: store, config: config, ledger: ledger, logger: logger)
            try engine.install()
            let task = Task { await engine.run() }
            defer { task.cancel() }
            await eventually("the worker's first look") { ledger.reads >= 1 }
            try await settled(engine, store)
            let before = ledger.reads
            for i in 1...10 {
                try live(store, "1", after: String(50 - i))
                try await eventually("alert \(i) recorded") {
                    (try store.deliveryCounts()["hook"]?["delivered"] ?? 0) == i
                }
                try await settled(engine, store)  // each alert before the next: a steady pace
            }
            #expect(hook.received.count == 10)
            #expect(ledger.reads - before <= 2, "\(ledger.reads - before) reads for 10 alerts")
        }
    }

    /// A sink with nothing due looks at its ledger again after the time the ledger names for changes no signal tells
    /// of (on a file five minutes, as every writer signals; on a shared ledger a minute), and sleeps until then.
    @Test func anIdleSinkLooksAgainWhenItsLedgerSaysNotEveryMinute() async throws {
        let hook = WebhookReceiver()
        try await hook.run { base in
            let config = try AlertSettings.parse(
                "sinks:\n  hook:\n    type: webhook\n    url: \(base.appending(path: "hook"))\n", file: "t.yaml")
            let store = try store()
            #expect(store.unsignalledChangesSeenWithin == .seconds(300))
            let ledger = CountingLedger(store, lookAgainWithin: .milliseconds(300))
            let engine = RelayEngine(store: store, config: config, ledger: ledger, logger: logger)
            try engine.install()
            let task = Task { await engine.run() }
            defer { task.cancel() }
            try await settled(engine, store)
            let before = ledger.reads
            try await Task.sleep(for: .milliseconds(1_000))
            let looks = ledger.reads - before
            // Three in a quiet second; a starved machine may run a look late (a minute's cap would show none).
            #expect((1...4).contains(looks), "looked \(looks) times in 1 s at one look each 300 ms")
        }
    }

    /// Alerts planned in bursts and gaps while the workers send, read the ledger and take the planner's hand-over
    /// (a row committed just before a read is both read and handed over): each arrives once at each sink.
    @Test func alertsPlannedInBurstsAndGapsArriveOnceEach() async throws {
        let hook = WebhookReceiver()
        let chat = WebhookReceiver()
        let yaml =
            "sinks:\n  hook:\n    type: webhook\n    url: BASE_A/hook\n  chat:\n    type: slack\n    url: BASE_B/slack\n    rate_limit: 1000/s\n"
        try await withRelay(yaml, hook, chat) { store, engine in
            var rng = SystemRandomNumberGenerator()
            for i in 0..<150 {
                try live(store, "0.10", after: "\(1000 - i)", "item \(i)")
                if Int.random(in: 0..<4, using: &rng) == 0 {
                    try await Task.sleep(for: .microseconds(Int.random(in: 0..<3000, using: &rng)))
                }
            }
            await eventually("150 at each") { hook.received.count >= 150 && chat.received.count >= 150 }
            try await settled(engine, store)
            #expect(hook.received.count == 150 && chat.received.count == 150, "nothing twice")
            #expect(Set(hook.received.compactMap { $0.headers["webhook-id"] }).count == 150)
            #expect(
                try store.deliveryCounts()["hook"]?["delivered"] == 150
                    && store.deliveryCounts()["chat"]?["delivered"] == 150)
            let texts = chat.received.compactMap { try? JSONValue(parsing: $0.body)["text"]?.stringValue }
            #expect(
                texts.enumerated().allSatisfy { $1.contains("item \($0)") },
                "one child's alerts reach the chat in order")
        }
    }

    @Test func eachAlertArrivesOnceAtEachSinkWithAStableId() async throws {
        let hook = WebhookReceiver()
        let chat = WebhookReceiver()
        let yaml =
            "sinks:\n  hook:\n    type: webhook\n    url: BASE_A/hook\n  chat:\n    type: slack\n    url: BASE_B/slack\n    rate_limit: 100/s\n"
        try await withRelay(yaml, hook, chat) { store, engine in
            for i in 0..<5 { try live(store, "1.00", after: "\(49 - i)", "item \(i)") }
            // Every row delivered in the ledger, and the relay settled: a send twice would have arrived by now.
            try await eventually("5 delivered at each") {
                let counts = try store.deliveryCounts()
                return counts["hook"]?["delivered"] == 5 && counts["chat"]?["delivered"] == 5
            }
            try await settled(engine, store)
            #expect(hook.received.count == 5 && chat.received.count == 5, "nothing twice")
            // The id each request carries is its ledger row's: the one a resend after a crash carries too.
            let ledgerIds = try store.deliveries(sink: "hook").map(\.id)
            #expect(hook.received.compactMap { $0.headers["webhook-id"] }.sorted() == ledgerIds.sorted())
            // A chat keeps one child's alerts in the order they happened.
            let texts = chat.received.map { (try? JSONValue(parsing: $0.body)["text"]?.stringValue) ?? "" }
            #expect(texts.count == 5)
            for (i, text) in texts.enumerated() { #expect(text.contains("item \(i)"), "\(i): \(text)") }
        }
    }

    /// The generic webhook's `data` is the stored alert byte for byte (no parse and re-render on the way), and a
    /// row that cannot be read (a kind from a newer version, an alert that is not JSON) becomes a dead letter with
    /// the reason, while the alerts after it go out.
    @Test func theWebhookForwardsTheStoredAlertAndAnUnreadableRowIsADeadLetter() async throws {
        let hook = WebhookReceiver()
        let chat = WebhookReceiver()
        let yaml =
            "sinks:\n  hook:\n    type: webhook\n    url: BASE_A/hook\n  chat:\n    type: slack\n    url: BASE_B/slack\n    rate_limit: 100/s\n"
        try await withRelay(yaml, hook, chat) { store, engine in
            try live(store, "1.00", after: "49", "forwarded")
            // Recorded, not only received: the damage below must not race the outcomes' commit.
            try await eventually("one recorded at each") {
                let counts = try store.deliveryCounts()
                return counts["hook"]?["delivered"] == 1 && counts["chat"]?["delivered"] == 1
            }
            let stored = try #require(try store.deliveries(sink: "hook").first?.alert)
            #expect(hook.received[0].text.hasSuffix(#","data":"# + stored + "}"), "\(hook.received[0].text)")
            #expect(stored.contains(#""currency":"USD""#) && stored.contains(#""kind":"transaction.created""#))

            let db = try DatabaseQueue(path: store.path)
            try await db.write { db in
                try db.execute(
                    sql: "UPDATE delivery SET state = 'pending', kind = 'from.the.future' WHERE sink = 'hook'")
                try db.execute(sql: "UPDATE delivery SET state = 'pending', alert = '{not json' WHERE sink = 'chat'")
            }
            // The damage comes from outside, which wakes no worker (a running relay sees such changes within a
            // minute); a reload's new workers read the ledger at once.
            _ = engine.reload(engine.config)
            try live(store, "1.00", after: "48", "after the damage")
            try await eventually("the damaged rows given up, the new alerts sent") {
                let counts = try store.deliveryCounts()
                return counts["hook"]?["dead"] == 1 && counts["chat"]?["dead"] == 1 && hook.received.count == 2
                    && chat.received.count == 2
            }
            let reasons = try await db.read { db in
                try String.fetchAll(db, sql: "SELECT last_error FROM delivery WHERE state = 'dead' ORDER BY sink")
            }
            #expect(
                reasons.count == 2 && reasons[0].contains("unreadable alert")
                    && reasons[1].contains("unknown kind 'from.the.future'"), "\(reasons)")
        }
    }

    @Test func aThrottleThenAnErrorAreWaitedOutAndTheAlertArrivesOnce() async throws {
        let hook = WebhookReceiver { _, n in
            switch n {
            case 0: .init(429, headers: ["Retry-After": "1"])
            case 1: .init(500)
            default: .init(200)
            }
        }
        try await withRelay("sinks:\n  hook:\n    type: webhook\n    url: BASE_A/hook\n", hook) { store, engine in
            try live(store, "1.00", after: "49")
            await eventually("the third attempt") { hook.received.count >= 3 }
            try await settled(engine, store)
            let t = hook.arrivals
            #expect(hook.received.count == 3, "delivered on the third attempt and not again")
            #expect(t[1] - t[0] >= .milliseconds(950), "Retry-After: 1 honoured: \(t[1] - t[0])")
            #expect(t[2] - t[1] >= .seconds(3), "exponential back-off after the 500 (about 4 s): \(t[2] - t[1])")
            #expect(
                Set(hook.received.compactMap { $0.headers["webhook-id"] }).count == 1, "the same id on every attempt")
            #expect(try store.deliveries(sink: "hook").first?.state == .delivered)
        }
    }

    @Test func aGoneSinkIsSwitchedOffAndTheOtherSinksAreTold() async throws {
        let gone = WebhookReceiver { _, _ in .init(410, body: "channel_is_archived") }
        let other = WebhookReceiver()
        let yaml = """
            sinks:
              old:
                type: slack
                url: BASE_A/slack
              new:
                type: webhook
                url: BASE_B/hook
            rules:
              - event: [transaction.created, delivery.disabled]
                to: [old, new]
            """
        try await withRelay(yaml, gone, other) { store, engine in
            try live(store, "1.00", after: "49")
            await eventually("the disabled alert") { other.received.count == 2 }
            let kinds = other.received.compactMap { try? JSONValue(parsing: $0.body)["type"]?.stringValue }
            #expect(Set(kinds) == ["transaction.created", "delivery.disabled"])
            #expect(try store.disabledSinks()["old"]?.contains("410") == true)
            try live(store, "1.00", after: "48")
            await eventually("the other sink's second alert") { other.received.count == 3 }
            await eventually("every worker to settle") { engine.sinksAreSettled }
            #expect(gone.received.count == 1, "no more sends to a switched-off sink")
            #expect(
                try store.deliveries(sink: "old", state: .pending).count == 2, "its alerts wait until it is enabled")
            #expect(
                try store.deliveries(sink: "old").allSatisfy { $0.kind != .deliveryDisabled }, "not told about itself")
        }
    }

    @Test func aRefusedAlertBecomesADeadLetterAndDoesNotBlockTheNext() async throws {
        let hook = WebhookReceiver { _, n in n == 0 ? .init(400, body: #"{"message":"bad payload"}"#) : .init(200) }
        try await withRelay("sinks:\n  hook:\n    type: webhook\n    url: BASE_A/hook\n", hook) { store in
            try live(store, "1.00", after: "49", "first")
            try live(store, "1.00", after: "48", "second")
            await eventually("both tried") { hook.received.count == 2 }
            // Both outcomes are written, in whichever order the two concurrent sends finished.
            await eventually("the ledger settles") {
                (try? store.deliveries(sink: "hook", state: .delivered).count) == 1
                    && (try? store.deliveries(sink: "hook", state: .dead).count) == 1
            }
            let dead = try store.deliveries(sink: "hook", state: .dead)
            #expect(dead.count == 1 && dead[0].lastError == "HTTP 400: bad payload")
            #expect(try store.retryDeliveries(sink: "hook") == 1, "a dead letter can be queued again")
        }
    }

    @Test func aSlowSinkDoesNotDelayTheOthers() async throws {
        let slow = WebhookReceiver { _, _ in .init(200, delay: .seconds(3)) }
        let fast = WebhookReceiver()
        let yaml =
            "sinks:\n  slow:\n    type: webhook\n    url: BASE_A/hook\n    concurrency: 1\n  fast:\n    type: webhook\n    url: BASE_B/hook\n"
        try await withRelay(yaml, slow, fast) { store in
            let start = ContinuousClock.now
            for i in 0..<3 { try live(store, "1.00", after: "\(49 - i)") }
            await eventually("the fast sink has all three", timeout: .seconds(2)) { fast.received.count == 3 }
            #expect(ContinuousClock.now - start < .seconds(2))
            #expect(slow.received.count <= 1, "the slow one is still on its first")
        }
    }

    /// A slow destination gets `concurrency` sends at once (on as many kept-alive connections); a chat gets one
    /// child's alerts one after the other, in the order they happened, whatever its concurrency.
    @Test func aSinkSendsUpToItsConcurrencyAtOnceAndAChatKeepsEachChildsOrder() async throws {
        let hook = WebhookReceiver { _, _ in .init(200, delay: .milliseconds(800)) }
        let chat = WebhookReceiver { _, _ in .init(200, delay: .milliseconds(300)) }
        let yaml = """
            sinks:
              hook:
                type: webhook
                url: BASE_A/hook
                concurrency: 3
              chat:
                type: slack
                url: BASE_B/slack
                rate_limit: 100/s
            """
        try await withRelay(yaml, hook, chat) { store in
            for i in 0..<6 { try live(store, "1.00", after: "\(49 - i)", "item \(i)") }
            await eventually("all six at each", timeout: .seconds(10)) {
                hook.received.count == 6 && chat.received.count == 6
            }
            // Three at once; the fourth only once a slot is free again (an answer takes 800 ms).
            let at = hook.arrivals.sorted()
            #expect(
                at[2] - at[0] < .milliseconds(600) && at[3] - at[0] >= .milliseconds(750),
                "arrivals: \(at.map { $0 - at[0] })")
            let texts = chat.received.map { (try? JSONValue(parsing: $0.body)["text"]?.stringValue) ?? "" }
            #expect(texts.enumerated().allSatisfy { $1.contains("item \($0)") }, "in order: \(texts)")
            let gaps = zip(chat.arrivals.dropFirst(), chat.arrivals).map { $0 - $1 }
            #expect(gaps.allSatisfy { $0 >= .milliseconds(250) }, "each after the answer to the one before: \(gaps)")
            await eventually("all recorded") {
                (try? store.deliveryCounts())?["hook"]?["delivered"] == 6
                    && (try? store.deliveryCounts())?["chat"]?["delivered"] == 6
            }
        }
    }

    @Test func aWriteTheServerRefusedIsAlertedFromTheSameTransaction() throws {
        let store = try store()
        let config = try AlertSettings.parse("sinks:\n  chat: slack://T/B/X\n", file: "t.yaml")
        try RelayEngine(store: store, config: config, logger: logger).install()
        let w = try store.enqueueTransaction(child: alice, amount: 5, type: .credit, description: "chores")
        try store.outboxRejected(w.seq, reason: "HTTP 409: conflict")
        let planned = try #require(try store.deliveries(sink: "chat").first)
        #expect(try planned.kind == .outboxRejected && planned.event.detail == "HTTP 409: conflict")
        #expect(try planned.event.transaction?.description == "chores")
    }

    /// The wait is driven by hand (no sleep races the timer): a link back before the time raises nothing; a link
    /// lost twice is one timer, and when it runs out, one `connection.lost` naming the first reason.
    @Test func aHubAwayForLongRaisesConnectionLostOnceAndNotWhenItCameBack() async throws {
        let store = try store()
        let timer = ManualTimer()
        var config = try AlertSettings.parse("sinks:\n  chat: slack://T/B/X\n", file: "t.yaml")
        config.connectionLostAfter = 300
        let engine = RelayEngine(store: store, config: config, logger: logger, sleep: timer.sleep)
        try engine.install()
        engine.linkLost("blip")
        await eventually("the timer to start") { timer.waiting == 1 }
        engine.linkRestored()
        await eventually("the timer to be cancelled") { timer.waiting == 0 && timer.cancelled == 1 }
        #expect(try store.deliveries(sink: "chat").isEmpty, "back within the time: nothing to say")
        engine.linkLost("server down")
        engine.linkLost("still down")
        await eventually("one timer for both") { timer.waiting == 1 }
        #expect(timer.started == 2, "the second loss started no timer of its own")
        timer.fire()
        try await eventually("connection.lost raised") { try !store.deliveries(sink: "chat").isEmpty }
        let lost = try store.deliveries(sink: "chat")
        #expect(lost.count == 1 && lost[0].kind == .connectionLost)
        #expect(try lost[0].event.detail == "no connection for 5 minutes: server down")
    }

}
