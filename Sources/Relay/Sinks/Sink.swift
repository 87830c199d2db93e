import Alerts
import AllowanceAPI
import Config
import Foundation
import HTTPTransport
import StoreContract

/// What a sink is asked to send: one rendered alert with its stable delivery id.
public struct Message: Sendable {
    /// The delivery id: the same on every retry (webhook-id, Matrix txnId, an idempotency key).
    public var id: String
    public var kind: RelayEvent.Kind
    public var urgency: PlannedDelivery.Urgency
    public var title: String
    public var text: String
    /// The child the alert is about (a desktop popup stands per child).
    public var childId: UUID?
    /// The alert's JSON as the ledger stores it: the generic webhook's `data`, sent as it is.
    public var alert: String
    /// The alert as a value, when the worker has it (every sink but the generic webhook, which forwards the text).
    public var event: RelayEvent?
    /// The alert's time as written in it: the generic webhook's `timestamp`.
    public var at: String
    /// The child's first name in the alert ("" when it names none): a popup's or a burst's title.
    public var childName: String
    /// Where a click on the alert leads (`relay.link` filled in for this alert); nil: nowhere.
    public var link: String?
    /// The send's span (tracing on), as W3C `traceparent`: the generic webhook passes it on, so that a receiver
    /// that traces joins the event's trace. Chat and push services are not told.
    public var traceParent: String?
    /// A picture to go with the text (a summary's chart, PNG), for a sink that shows one (`SinkConfig.showsPictures`).
    public var image: [UInt8]?

    /// A message with its alert as stored, and as a value when the worker has one (then nothing is read back from
    /// the text).
    public init(
        id: String, kind: RelayEvent.Kind, urgency: PlannedDelivery.Urgency, title: String = "", text: String = "",
        childId: UUID?,
        alert: String, event: RelayEvent? = nil, link: String? = nil
    ) {
        self.id = id
        self.kind = kind
        self.urgency = urgency
        self.title = title
        self.text = text
        self.childId = childId
        self.alert = alert
        self.event = event
        if let event {
            at = ISODate.string(event.at)
            childName = event.childName ?? ""
        } else {
            at = RelayEvent.time(inAlert: alert) ?? ""
            childName = RelayEvent.childName(inAlert: alert) ?? ""
        }
        self.link = link
    }

    /// A message about `event`, its alert written as the ledger would store it (tests, `notify test`).
    public init(
        id: String, kind: RelayEvent.Kind, urgency: PlannedDelivery.Urgency, title: String, text: String,
        event: RelayEvent,
        currency: String? = nil, link: String? = nil
    ) {
        var alert = event
        alert.kind = kind
        self.init(
            id: id, kind: kind, urgency: urgency, title: title, text: text, childId: event.childId,
            alert: alert.jsonText(currency: currency),
            event: alert, link: link)
    }
}

/// How one attempt ended, and what the worker does next.
public enum DeliveryOutcome: Sendable, Equatable {
    case delivered
    /// Worth another try later (408, 5xx, network, a redirect not followed); `after` is what the server asked for.
    case retry(String, after: TimeInterval?)
    /// 429: the whole sink waits `after` seconds (or a back-off when the server did not say).
    case throttled(String, after: TimeInterval?)
    /// 410, Discord's unknown webhook: the destination is gone; the sink is switched off.
    case disable(String)
    /// Another 4xx: this alert will never be accepted (dead letter with the reason).
    case rejected(String)
    /// The sink cannot work right now (no session bus, no notification server): it waits and tries again later.
    case unavailable(String)
}

/// A destination. Implementations render nothing themselves: they put a `Message` on the wire and classify the answer.
public protocol Sink: Sendable {
    var config: SinkConfig { get }
    /// Whether placeholder values must be escaped for markup (asked once per batch; desktop servers differ).
    func supportsMarkup() async -> Bool
    func send(_ message: Message) async -> DeliveryOutcome
    /// Opens what the sink keeps open (a broker connection) as its worker starts, before any alert.
    func start() async
    /// A catch-up may have found children added or deleted on the server (a sink that shows the family republishes).
    func familyChanged() async
    /// Ends what the sink keeps open (a broker connection), once its worker has finished.
    func close() async
}

extension Sink {
    public func supportsMarkup() async -> Bool { true }
    public func start() async {}
    public func familyChanged() async {}
    public func close() async {}
}

/// Builds the sink for a config. `memory`: the store, where sinks keep what outlives the process (nil: nothing is
/// kept: every balance is a new message, Home Assistant learns of children from alerts only); `popups`: where this
/// machine keeps its popups' ids (nil: popups stack);
/// `formatting`: the relay's settings some sinks use (the icon for ntfy, the currency for Home Assistant, the
/// family's day for "Mute today"). `mutes`: where "Mute today" on a popup goes.
public func makeSink(
    _ config: SinkConfig, memory: (any SentMessageLedger & ChildRoster & GoalStore)? = nil,
    popups: (any PopupIds)? = nil,
    http: HTTPClient = .shared, formatting: Formatting = Formatting(), mutes: MuteList? = nil
) -> any Sink {
    switch config.kind {
    case .desktop: DesktopSink(config: config, ids: popups, mutes: mutes, timeZone: formatting.timeZone)
    case .mqtt: MQTTSink(config: config, roster: memory, currency: formatting.currency)
    case .email: MailSink(config: config, client: http)
    default: HTTPSink(config: config, client: http, icon: formatting.iconURL, sent: memory)
    }
}
