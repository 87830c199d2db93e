import Alerts
import AllowanceAPI
import Foundation

/// What the relay keeps of its own beside the ledger, written once as protocols that both stores implement: the
/// SQLite file of a single relay (`Store`) and the PostgreSQL database replicas share (`SharedRelayStore`). On the
/// shared one every replica sees the same: the message a dead replica posted is edited by the next, a mute set on
/// one machine holds on all, a summary period done by one is not sent again by another.
public typealias RelayStore = DeliveryLedger & SentMessageLedger & ChildRoster & MuteStore & SummaryLedger
    & PlanningStore
    & StatusSource & GoalStore

/// The whole contract: what the relay, the sync engine, the daemon and the CLI use. Both stores implement all of it.
public typealias RelayStorage = RelayStore & SyncStore & OperatorStore

/// Where the chat sinks remember the message standing for a child's balance.
public protocol SentMessageLedger: Sendable {
    func sentMessage(sink: String, subject: String) throws(StoreError) -> SentMessage?
    /// Records the message now standing for (sink, subject); nil forgets it (the destination no longer has it).
    func setSentMessage(sink: String, subject: String, _ message: SentMessage?) throws(StoreError)
}

/// The children the cache knows: what Home Assistant is shown at once, before any alert; whom a summary covers.
public protocol ChildRoster: Sendable {
    func children() throws(StoreError) -> [Child]
    /// When each child's cached balance was last set: a balance published again after a restart says how old it is.
    func balanceTimes() throws(StoreError) -> [UUID: Date]
}

/// Sinks muted per child ("Mute today", `allowance-relay mute`).
public protocol MuteStore: Sendable {
    /// Mutes `sink` for the child until `until` (a later mute of the same pair replaces it).
    func mute(_ m: Mute) throws(StoreError)
    /// Lifts the mutes of `child` (on `sink` only, when given); returns how many there were.
    @discardableResult func unmute(child: UUID, sink: String?) throws(StoreError) -> Int
    /// The mutes still running at `now`. A read only: the `mute` command and `status` change nothing.
    func mutes(at now: Date) throws(StoreError) -> [Mute]
}

/// Scheduled summaries: which period each rule last did, and the transactions a period covers.
public protocol SummaryLedger: Sendable {
    /// The end of the last period summary `rule` was planned for; nil if the rule has never run.
    func summaryLastDue(rule: String) throws(StoreError) -> Date?
    /// Plans the summaries of the period ending at `due` (one event per child, through the planner) and records the
    /// period as done, in one transaction. Nothing happens if that period (or a later one) is done already, by this
    /// relay or another. With `baselineOnly`, only records the period: a rule seen for the first time starts from now.
    @discardableResult
    func raiseSummaries(rule: String, due: Date, events: [RelayEvent], baselineOnly: Bool) throws(StoreError) -> Int
    /// The newest transactions, newest first (`child`, `since`: only those).
    func transactions(child: UUID?, since: Date?, limit: Int) throws(StoreError) -> [Transaction]
}

/// Where the rules plan: each stored event plans its deliveries inside the transaction that stores it.
public protocol PlanningStore: Sendable {
    /// The rules that turn events into deliveries (nil: nothing is planned). `onPlanned`: called after a commit with
    /// the rows it planned, for a store whose rows go to this process's workers in memory; a store whose rows any
    /// relay may claim wakes the workers by its own means and does not call it.
    func setPlanner(_ planner: (any AlertPlanner)?, onPlanned: (@Sendable ([Delivery]) -> Void)?)
    /// The sinks that keep one child's alerts in order (the chats): one send per child at a time. A ledger shared by
    /// several relays hands out only a child's oldest due delivery, and none while another is out.
    func setOrderedSinks(_ sinks: Set<String>)
    /// Deliveries a crash left marked in flight, pending again; returns how many.
    func requeueInFlightDeliveries() throws(StoreError) -> Int
    /// Deliveries by sink and state, for the status.
    func deliveryCounts() throws(StoreError) -> [String: [String: Int]]
    /// The deliveries still owed (pending, in flight) and given up (dead), by sink and state: what `/metrics` and a
    /// reload's report read, without reading the delivered ones' history.
    func owedDeliveryCounts() throws(StoreError) -> [String: [String: Int]]
    /// Deliveries held for later (quiet hours): pending, never tried, due after `after`.
    func heldDeliveries(dueAfter after: Date) throws(StoreError) -> [Delivery]
    /// Applies what re-planning the held deliveries decided (a reload changed quiet hours, a mute came): each row
    /// still held and untried takes its new due time, or is muted.
    func replanHeld(_ changes: [(id: String, change: HeldChange)]) throws(StoreError)
}

/// What re-planning does to a held delivery.
public enum HeldChange: Sendable, Equatable {
    /// Due at this time instead (now, when its quiet hours are gone).
    case due(Date)
    /// Not sent: its sink is muted for the child now (`lastError` says so).
    case muted(String)
}

/// The desktop popups standing for a child: per machine by nature (a popup is on this machine's screen), so they stay
/// in the local file even where the rest is shared.
public protocol PopupIds: Sendable {
    func popup(sink: String, child: UUID, role: PopupRole) throws(StoreError) -> UInt32?
    func setPopup(sink: String, child: UUID, role: PopupRole, id: UInt32?) throws(StoreError)
}

/// The desktop popup standing for a child's balance, or for its low balance: replaced in place by the next one,
/// closed when the balance recovers.
public enum PopupRole: String, Sendable {
    case balance, low
}
