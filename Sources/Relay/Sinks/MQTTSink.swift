import Alerts
import Core
import Foundation
import Logging
import MQTTTransport
import Synchronization

/// Alerts to an MQTT broker, shaped for Home Assistant. Under the base topic (`allowance` by default):
/// - `allowance/status`: `online`, or `offline` (retained; the broker says `offline` itself if the relay vanishes);
/// - `allowance/child/ID/state`: the child's balance with its currency (retained: a dashboard shows it at once);
/// - `allowance/child/ID/last_transaction` (retained) and `allowance/child/ID/transaction` (an event per
///   transaction, `event_type` credit or debit);
/// - `allowance/alert`: every alert, as `{"type", "id", "title", "text", "data"}` with `data` the stored alert.
/// With discovery on, Home Assistant finds a device "Allowance Tracker" with a balance sensor (`monetary`) and a
/// transaction event entity per child. An alert counts as delivered once the broker acknowledged each of its
/// messages (QoS 1).
public final class MQTTSink: Sink {
    public let config: SinkConfig
    private let client: MQTTClient?
    private let setupProblem: String?
    /// Per child, the retained messages last published (discovery and state): published again when the broker or
    /// Home Assistant comes back, which may have lost them.
    private let retained = Mutex<[String: [String: [UInt8]]]>([:])

    init(config: SinkConfig) {
        self.config = config
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
                logger.warning("sink \(name): mqtt: lost the broker (\(reason)); reconnecting, unacknowledged alerts are sent again")
            }
            c.onConnect = { [weak self, weak c] in
                logger.notice("sink \(name): mqtt: connected to \(broker)")
                c?.publishNow("\(base)/status", Array("online".utf8), retain: true)
                if let discovery { c?.subscribe("\(discovery)/status") }
                self?.republish()
            }
            c.onMessage = { [weak self] topic, payload in
                // Home Assistant's birth message: it has (re)started and needs the discovery messages again.
                if let discovery, topic == "\(discovery)/status", payload == Array("online".utf8) { self?.republish() }
            }
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
        await client?.close(goodbye: ("\(config.mqtt.topic)/status", "offline"))
    }

    /// The messages for one alert, in the order they are published. Public for the tests.
    public func messages(for m: Message) -> [(topic: String, payload: [UInt8], retain: Bool)] {
        let base = config.mqtt.topic
        var out: [(String, [UInt8], Bool)] = []
        let alert = (try? JSONValue(parsing: Array(m.alert.utf8))) ?? .null
        if let child = alert["childId"]?.stringValue {
            let name = alert["childName"]?.stringValue ?? String(child.prefix(8))
            let currency = alert["currency"]?.stringValue ?? "USD"
            let transaction = alert["transaction"]
            var latest: [String: [UInt8]] = [:]
            // Discovery once per child and process; a reconnection or Home Assistant's restart repeats it (republish).
            if retained.withLock({ $0[child] == nil }) {
                for (topic, payload) in discovery(child: child, name: name, currency: currency) { latest[topic] = payload }
            }
            if let balance = alert["balance"]?.stringValue ?? transaction?["balanceAfter"]?.stringValue {
                var w = JSONWriter()
                w.beginObject()
                w.member("child", name)
                w.member("balance", balance)
                w.member("currency", currency)
                w.member("updated_at", m.at)
                w.endObject()
                latest["\(base)/child/\(child)/state"] = Array(w.text.utf8)
            }
            if m.kind == .transactionCreated, let t = transaction, let type = t["type"]?.stringValue {
                let event = Self.transactionEvent(t, type: type, currency: currency)
                latest["\(base)/child/\(child)/last_transaction"] = event
                out.append(("\(base)/child/\(child)/transaction", event, false))
            }
            retained.withLock { $0[child, default: [:]].merge(latest) { _, new in new } }
            out = latest.sorted { $0.key < $1.key }.map { ($0.key, $0.value, true) } + out
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

    /// Home Assistant MQTT discovery: one device for the family; a balance sensor and a transaction event per child.
    func discovery(child: String, name: String, currency: String) -> [(String, [UInt8])] {
        guard let prefix = config.mqtt.discoveryPrefix else { return [] }
        let base = config.mqtt.topic
        let node = "allowance_relay_" + base.map { $0.isLetter || $0.isNumber ? String($0) : "_" }.joined()
        let object = child.replacingOccurrences(of: "-", with: "")
        func common(_ w: inout JSONWriter, entity: String, label: String) {
            w.member("name", label)
            w.member("unique_id", "\(node)_\(object)_\(entity)")
            w.member("availability_topic", "\(base)/status")
            w.key("device")
            w.beginObject()
            w.key("identifiers")
            w.beginArray()
            w.string(node)
            w.endArray()
            w.member("name", "Allowance Tracker")
            w.member("manufacturer", "allowance-relay")
            w.member("model", "Allowance Tracker family")
            w.endObject()
        }
        var sensor = JSONWriter()
        sensor.beginObject()
        common(&sensor, entity: "balance", label: "\(name) balance")
        sensor.member("state_topic", "\(base)/child/\(child)/state")
        sensor.member("value_template", "{{ value_json.balance }}")
        sensor.member("json_attributes_topic", "\(base)/child/\(child)/state")
        sensor.member("device_class", "monetary")
        sensor.member("unit_of_measurement", currency)
        sensor.member("icon", "mdi:piggy-bank")
        sensor.endObject()
        var event = JSONWriter()
        event.beginObject()
        common(&event, entity: "transaction", label: "\(name) transaction")
        event.member("state_topic", "\(base)/child/\(child)/transaction")
        event.key("event_types")
        event.beginArray()
        event.string("credit")
        event.string("debit")
        event.endArray()
        event.member("icon", "mdi:cash-multiple")
        event.endObject()
        return [
            ("\(prefix)/sensor/\(node)/\(object)_balance/config", Array(sensor.text.utf8)),
            ("\(prefix)/event/\(node)/\(object)_transaction/config", Array(event.text.utf8)),
        ]
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

    /// Every child's retained messages again, without waiting (on the network thread, after a (re)connection).
    private func republish() {
        for (topic, payload) in retained.withLock({ $0.values.flatMap { $0.map { ($0.key, $0.value) } } }) {
            client?.publishNow(topic, payload, retain: true)
        }
    }
}
