import Alerts
import AllowanceAPI
import Config
import Core
import Foundation
import Logging
import MQTTTransport
import StoreContract
import Synchronization

/// Alerts to an MQTT broker, shaped for Home Assistant. Under the base topic (`allowance` by default):
/// - `allowance/status`: `online`, or `offline` (retained; the broker says `offline` itself if the relay vanishes);
/// - `allowance/child/ID/state`: the child's balance with its currency (retained: a dashboard shows it at once);
/// - `allowance/child/ID/last_transaction` (retained) and `allowance/child/ID/transaction` (an event per
///   transaction, `event_type` credit or debit);
/// - `allowance/child/ID/goals` (retained): the child's wish list items not bought yet, by id, each with its
///   `name`, `price` and `progress` (the balance against the price, whole percent), published with each balance;
/// - `allowance/alert`: every alert, as `{"type", "id", "title", "text", "data"}` with `data` the stored alert.
///
/// With discovery on, Home Assistant finds a device per child (device-based discovery: one retained message at
/// `homeassistant/device/NODE_CHILD/config` with the `origin` block) with a balance sensor (`monetary`,
/// `state_class: total`), a transaction event entity and a progress sensor per goal (an item not bought yet; the
/// device is published again when the goals change). The sink connects when it starts, not at the first alert:
/// every child the cache knows is published with its balance at each connection, on Home Assistant's birth
/// message, and when the family changes (a catch-up found a child added or deleted). A deleted child's device is
/// removed with an empty retained config, also when it was deleted while the relay was stopped: the retained
/// configs, read back from the broker, say what was published. Discovery messages of the older per-entity form
/// (`homeassistant/sensor/NODE/..._balance/config`) are cleared.
/// An alert counts as delivered once the broker acknowledged each of its messages (QoS 1).
public final class MQTTSink: Sink {
    public let config: SinkConfig
    private let client: MQTTClient?
    private let setupProblem: String?
    /// The children the cache knows and their goals (nil: only those alerts name, for `notify test`).
    private let roster: (any ChildRoster & GoalStore)?
    private let currency: String
    private let state = Mutex(Published())
    private let starter = Mutex<Task<Void, Never>?>(nil)

    /// What this process published, so that a change of the family republishes only when it must.
    private struct Published {
        /// Per child, the last transaction event (retained), published again when the broker comes back.
        var lastTransaction: [String: [UInt8]] = [:]
        /// The children (lower-cased id -> first name) whose devices this process published.
        var children: [String: String] = [:]
        /// Per child, the goals its published device has a sensor for.
        var goals: [String: [Goal]] = [:]
    }

    init(config: SinkConfig, roster: (any ChildRoster & GoalStore)? = nil, currency: String = "USD") {
        self.config = config
        self.roster = roster
        self.currency = currency
        do {
            let c = try MQTTClient(Self.options(config))
            client = c
            setupProblem = nil
            let base = config.mqtt.topic
            let discovery = config.mqtt.discoveryPrefix
            let logger = Logger(label: "allowance-relay")
            let name = config.name
            let broker = "\(c.options.host):\(c.options.port)"
            c.onDisconnect = { reason in
                logger.warning(
                    "sink \(name): mqtt: lost the broker (\(reason)); reconnecting, unacknowledged alerts are sent again"
                )
            }
            c.onConnect = { [weak self, weak c] in
                logger.notice("sink \(name): mqtt: connected to \(broker)")
                c?.publishNow("\(base)/status", Array("online".utf8), retain: true)
                if let discovery, let self {
                    c?.subscribe("\(discovery)/status")
                    c?.subscribe("\(discovery)/device/+/config")  // what an earlier run published
                    c?.subscribe("\(discovery)/+/\(self.node)/+/config")  // the older per-entity form, to clear
                }
                self?.publishFamily(force: true)
            }
            c.onMessage = { [weak self] topic, payload in self?.received(topic, payload) }
        } catch {
            client = nil
            setupProblem = "mqtt: \(error.message)"
        }
    }

    static func options(_ config: SinkConfig) -> MQTTClient.Options {
        let url = config.url ?? URL(string: "mqtt://localhost")!
        let tls = url.scheme?.lowercased() == "mqtts"
        let host = ProcessInfo.processInfo.hostName.split(separator: ".").first.map(String.init) ?? "host"
        var o = MQTTClient.Options(
            host: url.host() ?? "localhost", port: url.port ?? (tls ? 8883 : 1883),
            clientId: config.mqtt.clientId ?? String("allowance-relay-\(host)-\(config.name)".prefix(64)))
        o.protocolVersion = config.mqtt.protocolVersion == .v5 ? .v5 : .v311
        o.tls = tls
        o.caFile = config.caFile
        o.username = config.username
        o.password = config.password?.value
        o.will = ("\(config.mqtt.topic)/status", "offline")
        return o
    }

    public func supportsMarkup() async -> Bool { false }

    /// Connects now, and keeps trying while the broker is down (libmosquitto reconnects by itself once it was reached).
    public func start() async {
        guard let client else { return }
        starter.withLock { task in
            guard task == nil else { return }
            task = Task {
                while !Task.isCancelled, !client.isStarted {
                    client.start()
                    try? await Task.sleep(for: .seconds(2))
                }
            }
        }
    }

    /// A catch-up found the family changed: publish what changed (nothing when no child came or went).
    public func familyChanged() async {
        publishFamily(force: false)
    }

    public func send(_ m: Message) async -> DeliveryOutcome {
        guard let client else { return .rejected(setupProblem ?? "mqtt: no client") }
        let timeout = Duration.milliseconds(Int64(config.timeout * 1000))
        guard await client.waitConnected(timeout: timeout) else {
            let broker = "\(client.options.host):\(client.options.port)"
            return .retry("mqtt: not connected to \(broker)\(client.lastProblem.map { ": \($0)" } ?? "")", after: nil)
        }
        do {
            for (topic, payload, retain) in messages(for: m) {
                try await client.publish(topic, payload, retain: retain, timeout: timeout)
            }
            return .delivered
        } catch {
            return error.refused ? .rejected("mqtt: \(error.message)") : .retry("mqtt: \(error.message)", after: nil)
        }
    }

    public func close() async {
        starter.withLock { $0?.cancel() }
        await client?.close(goodbye: ("\(config.mqtt.topic)/status", "offline"))
    }

    /// The messages for one alert, in the order they are published. Public for the tests.
    public func messages(for m: Message) -> [(topic: String, payload: [UInt8], retain: Bool)] {
        let base = config.mqtt.topic
        var out: [(String, [UInt8], Bool)] = []
        let alert = (try? JSONValue(parsing: Array(m.alert.utf8))) ?? .null
        if let child = alert["childId"]?.stringValue?.lowercased() {
            let name = alert["childName"]?.stringValue ?? String(child.prefix(8))
            let currency = alert["currency"]?.stringValue ?? currency
            let transaction = alert["transaction"]
            let balance = alert["balance"]?.stringValue ?? transaction?["balanceAfter"]?.stringValue
            // Read only where a balance or a goal moves: the goals' progress goes out with each balance.
            let goals =
                balance != nil || m.kind == .goalPurchased || m.kind == .goalReached
                ? goals(of: child, balance: balance.flatMap { Decimal(string: $0) }) : nil
            // A child this process has not published yet (new since the last catch-up), or whose goals changed: its
            // device goes first.
            if let prefix = config.mqtt.discoveryPrefix,
                state.withLock({ s in
                    let new = s.children.updateValue(name, forKey: child) == nil
                    guard let goals, Self.sameGoals(s.goals[child], goals) == false else { return new }
                    s.goals[child] = goals
                    return true
                })
            {
                out.append(
                    (deviceTopic(prefix, child: child), device(child: child, name: name, goals: goals ?? []), true))
            }
            if let balance {
                out.append(
                    (
                        "\(base)/child/\(child)/state",
                        Self.balanceState(name: name, balance: balance, currency: currency, at: m.at), true
                    ))
            }
            if let goals { out.append(("\(base)/child/\(child)/goals", Self.goalsState(goals), true)) }
            if m.kind == .transactionCreated, let t = transaction, let type = t["type"]?.stringValue {
                let event = Self.transactionEvent(t, type: type, currency: currency)
                state.withLock { $0.lastTransaction[child] = event }
                out.append(("\(base)/child/\(child)/last_transaction", event, true))
                out.append(("\(base)/child/\(child)/transaction", event, false))
            }
        }
        var w = JSONWriter()
        w.beginObject()
        w.member("type", m.kind.rawValue)
        w.member("id", m.id)
        w.member("title", m.title)
        w.member("text", m.text)
        w.key("data")
        w.number(m.alert)  // the stored alert is JSON already: written as it is
        w.endObject()
        out.append(("\(base)/alert", Array(w.text.utf8), false))
        return out
    }

    /// `{"child", "balance", "currency", "updated_at"?}`: the retained state a dashboard shows.
    static func balanceState(name: String, balance: String, currency: String, at: String?) -> [UInt8] {
        var w = JSONWriter()
        w.beginObject()
        w.member("child", name)
        w.member("balance", balance)
        w.member("currency", currency)
        if let at, !at.isEmpty { w.member("updated_at", at) }
        w.endObject()
        return Array(w.text.utf8)
    }

    /// The child's goals (items not bought), with their progress at `balance` (nil: the cached balance).
    private func goals(of child: String, balance: Decimal?) -> [Goal]? {
        guard let roster, let id = UUID(uuidString: child), let rows = try? roster.goals(child: id) else { return nil }
        let current = balance ?? (try? roster.children().first { $0.id == id }?.currentBalance) ?? 0
        return rows.filter { !$0.item.isPurchased }.map { g in
            Goal(
                id: g.item.id, name: g.item.name, price: g.item.price, url: g.item.url,
                progress: Goal.progress(balance: current, price: g.item.price))
        }
    }

    /// Whether two goal lists need the same sensors (the same items under the same names; progress aside).
    static func sameGoals(_ a: [Goal]?, _ b: [Goal]) -> Bool {
        a.map { $0.map { "\($0.id) \($0.name)" } == b.map { "\($0.id) \($0.name)" } } ?? false
    }

    /// `{"ID": {"name", "price", "progress", "url"?}}`: the retained state the goal sensors read.
    static func goalsState(_ goals: [Goal]) -> [UInt8] {
        var w = JSONWriter()
        w.beginObject()
        for g in goals {
            w.key(named: g.id.lowercased)
            w.beginObject()
            w.member("name", g.name)
            w.member("price", Money.plain(g.price))
            w.key("progress")
            w.number(String(g.progress))
            if let url = g.url { w.member("url", url) }
            w.endObject()
        }
        w.endObject()
        return Array(w.text.utf8)
    }

    /// The discovery node id: one device per base topic (two relays on one broker use two base topics).
    var node: String {
        "allowance_relay_" + config.mqtt.topic.map { $0.isLetter || $0.isNumber ? String($0) : "_" }.joined()
    }

    func deviceTopic(_ prefix: String, child: String) -> String {
        "\(prefix)/device/\(node)_\(child.replacingOccurrences(of: "-", with: ""))/config"
    }

    /// Home Assistant's device-based discovery message for one child: the device, the origin, and its components
    /// (the balance sensor, the transaction event, a progress sensor per goal).
    func device(child: String, name: String, goals: [Goal] = []) -> [UInt8] {
        let base = config.mqtt.topic
        let object = child.replacingOccurrences(of: "-", with: "")
        var w = JSONWriter()
        w.beginObject()
        w.key("device")
        w.beginObject()
        w.key("identifiers")
        w.beginArray()
        w.string("\(node)_\(object)")
        w.endArray()
        w.member("name", name)
        w.member("manufacturer", "allowance-relay")
        w.member("model", "Allowance Tracker child")
        w.member("sw_version", RelayInfo.version)
        w.endObject()
        w.key("origin")
        w.beginObject()
        w.member("name", "allowance-relay")
        w.member("sw_version", RelayInfo.version)
        w.member("support_url", RelayInfo.supportURL)
        w.endObject()
        w.key("components")
        w.beginObject()
        w.key("balance")
        w.beginObject()
        w.member("platform", "sensor")
        w.member("name", "Balance")
        w.member("unique_id", "\(node)_\(object)_balance")
        w.member("availability_topic", "\(base)/status")
        w.member("state_topic", "\(base)/child/\(child)/state")
        w.member("value_template", "{{ value_json.balance }}")
        w.member("json_attributes_topic", "\(base)/child/\(child)/state")
        w.member("device_class", "monetary")
        // A monetary sensor takes `total` (a balance goes up and down) or no state class; not `measurement`.
        w.member("state_class", "total")
        w.member("unit_of_measurement", currency)
        w.member("icon", "mdi:piggy-bank")
        w.endObject()
        w.key("transaction")
        w.beginObject()
        w.member("platform", "event")
        w.member("name", "Transaction")
        w.member("unique_id", "\(node)_\(object)_transaction")
        w.member("availability_topic", "\(base)/status")
        w.member("state_topic", "\(base)/child/\(child)/transaction")
        w.key("event_types")
        w.beginArray()
        w.string("credit")
        w.string("debit")
        w.endArray()
        w.member("icon", "mdi:cash-multiple")
        w.endObject()
        for g in goals {
            let id = g.id.lowercased
            w.key(named: "goal_\(id.replacingOccurrences(of: "-", with: ""))")
            w.beginObject()
            w.member("platform", "sensor")
            w.member("name", "Goal: \(g.name)")
            w.member("unique_id", "\(node)_\(object)_goal_\(id.replacingOccurrences(of: "-", with: ""))")
            w.member("availability_topic", "\(base)/status")
            w.member("state_topic", "\(base)/child/\(child)/goals")
            // Gone from the list (bought, deleted): unknown until the device drops the sensor.
            w.member("value_template", "{{ value_json['\(id)'].progress if '\(id)' in value_json else None }}")
            w.member("unit_of_measurement", "%")
            w.member("state_class", "measurement")
            w.member("icon", "mdi:gift")
            w.endObject()
        }
        w.endObject()
        w.endObject()
        return Array(w.text.utf8)
    }

    static func transactionEvent(_ t: JSONValue, type: String, currency: String) -> [UInt8] {
        var w = JSONWriter()
        w.beginObject()
        w.member("event_type", type.lowercased())
        w.member("id", t["id"]?.stringValue ?? "")
        w.member("amount", t["amount"]?.stringValue ?? "")
        w.member("description", t["description"]?.stringValue ?? "")
        w.member("balance_after", t["balanceAfter"]?.stringValue ?? "")
        w.member("created_at", t["createdAt"]?.stringValue ?? "")
        w.member("created_by", t["createdByName"]?.stringValue ?? "")
        w.member("currency", currency)
        w.endObject()
        return Array(w.text.utf8)
    }

    /// Publishes every child the cache knows, its device and its balance, and removes the devices of the children
    /// gone; `force`: even when no child came or went (a new connection, Home Assistant's restart: either may have
    /// lost the retained messages). Without the discovery prefix only the balances go out. On the network thread or
    /// the worker's: never waits.
    private func publishFamily(force: Bool) {
        guard let client, client.isConnected, let roster, let children = try? roster.children() else { return }
        let family = Dictionary(children.map { ($0.id.lowercased, $0.firstName) }, uniquingKeysWith: { a, _ in a })
        let goals = Dictionary(
            children.map { ($0.id.lowercased, self.goals(of: $0.id.lowercased, balance: $0.currentBalance) ?? []) },
            uniquingKeysWith: { a, _ in a })
        let (before, goalsBefore, last) = state.withLock { s in
            defer { (s.children, s.goals) = (family, goals) }
            return (s.children, s.goals, s.lastTransaction)
        }
        // A wish list read may have added or dropped a goal: its sensor comes or goes.
        let goalsChanged = goals.contains { !Self.sameGoals(goalsBefore[$0.key], $0.value) }
        guard force || before != family || goalsChanged else { return }
        let times = (try? roster.balanceTimes()) ?? [:]
        remove(Set(before.keys).subtracting(family.keys))
        let base = config.mqtt.topic
        for c in children {
            let id = c.id.lowercased
            let goals = goals[id] ?? []
            if let prefix = config.mqtt.discoveryPrefix {
                client.publishNow(
                    deviceTopic(prefix, child: id), device(child: id, name: c.firstName, goals: goals), retain: true)
            }
            client.publishNow("\(base)/child/\(id)/goals", Self.goalsState(goals), retain: true)
            client.publishNow(
                "\(base)/child/\(id)/state",
                Self.balanceState(
                    name: c.firstName, balance: Money.plain(c.currentBalance), currency: currency,
                    at: times[c.id].map(ISODate.string)),
                retain: true)
            if let event = last[id] { client.publishNow("\(base)/child/\(id)/last_transaction", event, retain: true) }
        }
    }

    /// Empty retained messages delete the broker's copies: Home Assistant removes the device, a dashboard no longer
    /// shows the balance.
    private func remove(_ gone: Set<String>) {
        guard let client else { return }
        let base = config.mqtt.topic
        for child in gone {
            if let prefix = config.mqtt.discoveryPrefix {
                client.publishNow(deviceTopic(prefix, child: child), [], retain: true)
            }
            client.publishNow("\(base)/child/\(child)/state", [], retain: true)
            client.publishNow("\(base)/child/\(child)/last_transaction", [], retain: true)
            client.publishNow("\(base)/child/\(child)/goals", [], retain: true)
        }
        state.withLock { s in for child in gone { (s.lastTransaction[child], s.goals[child]) = (nil, nil) } }
    }

    /// Home Assistant's birth message, a child's device message as the broker kept it, or an old per-entity one.
    private func received(_ topic: String, _ payload: [UInt8]) {
        guard let prefix = config.mqtt.discoveryPrefix else { return }
        let devices = "\(prefix)/device/\(node)_"
        if topic == "\(prefix)/status" {
            // Home Assistant has (re)started and needs the discovery messages again.
            if payload == Array("online".utf8) { publishFamily(force: true) }
        } else if topic.hasPrefix(devices), topic.hasSuffix("/config"), !payload.isEmpty {
            // What an earlier run published: a child the cache no longer lists was deleted meanwhile.
            let object = Array(topic.dropFirst(devices.count).dropLast("/config".count))
            // A cache with no children yet (a new database before its first catch-up) knows of no deletion.
            guard object.count == 32, let roster, let listed = try? roster.children(), !listed.isEmpty else { return }
            let id = [object[0..<8], object[8..<12], object[12..<16], object[16..<20], object[20..<32]].map {
                String($0)
            }.joined(separator: "-")
            if !listed.contains(where: { $0.id.lowercased == id }) { remove([id]) }
        } else if topic.hasPrefix("\(prefix)/"), topic.hasSuffix("/config"), topic.contains("/\(node)/"),
            !payload.isEmpty
        {
            client?.publishNow(topic, [], retain: true)  // the older per-entity form: the devices replace it
        }
    }
}
