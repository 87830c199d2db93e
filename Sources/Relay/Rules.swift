import Alerts
import AllowanceAPI
import Config
import Foundation
import StoreContract

extension Rule {
    func matchesDetails(_ e: RelayEvent) -> Bool {
        if !children.isEmpty {
            let names = [e.childName?.lowercased(), e.childId?.lowercased].compactMap { $0 }
            guard names.contains(where: children.contains) else { return false }
        }
        if let type { guard e.transaction?.type == type else { return false } }
        if let amountAtLeast { guard let a = e.transaction?.amount, a >= amountAtLeast else { return false } }
        if let amountBelow { guard let a = e.transaction?.amount, a < amountBelow else { return false } }
        if let descriptionContains {
            guard e.transaction?.description.range(of: descriptionContains, options: .caseInsensitive) != nil else {
                return false
            }
        }
        return true
    }

    /// The kinds of alert this rule raises for `e`: its own kind; `balance.updated` once per change of a child's
    /// balance, whatever brought it (a transaction, a BalanceUpdated that differs from the cache, a catch-up), so
    /// the BalanceUpdated that only confirms a transaction's balance raises nothing; `balance.low` when the
    /// balance crossed the threshold downwards (once per drop), and `balance.recovered` when it came back.
    /// `events`: the rule's `events` as a mask (its planner keeps one).
    func kinds(for e: RelayEvent, events: RelayEvent.KindMask) -> [RelayEvent.Kind] {
        guard matchesDetails(e) else { return [] }
        if e.kind == .summary || summary != nil {
            return e.kind == .summary && e.summaryRule == name && summary != nil ? [.summary] : []
        }
        var kinds: [RelayEvent.Kind] = []
        let moves = e.kind == .transactionCreated || e.kind == .balanceUpdated
        let changed = moves && e.balanceChanged
        if events.contains(e.kind), e.kind != .balanceUpdated || changed { kinds.append(e.kind) }
        if e.kind == .transactionCreated, events.contains(.balanceUpdated), changed { kinds.append(.balanceUpdated) }
        if events.contains(.balanceLow), let below, moves, let balance = e.balance, let previous = e.previousBalance {
            if balance < below, previous >= below { kinds.append(.balanceLow) }
            if balance >= below, previous < below { kinds.append(.balanceRecovered) }
        }
        return kinds
    }
}

/// The rules as an `AlertPlanner`: pure, quick, run inside the store's write transaction.
public struct RulePlanner: AlertPlanner {
    public let rules: [Rule]
    public let sinks: [String: SinkConfig]
    /// Caught-up transactions wait this long, so the pages of one catch-up gather into one digest.
    public var digestGathering: TimeInterval = 3
    public let currency: String?
    /// Sinks muted per child ("Mute today"): nothing but critical alerts about the child goes to them meanwhile.
    let mutes: MuteList?
    /// What the first catch-up of a new database alerts (`relay.history`).
    let history: AlertSettings.HistoryMode
    let now: @Sendable () -> Date
    /// The rules as planning reads them for every event, worked out once: each rule's kinds as a mask and its sinks
    /// with what planning needs of them (a lookup in `sinks` copied the whole configuration, its templates, headers
    /// and secrets), in a class, so that going through them copies no rule.
    private let compiled: [CompiledRule]
    /// The kinds `mayPlan`, worked out once: it is asked for every event, and went through every rule (a copy of each).
    private let plannable: RelayEvent.KindMask

    private struct SinkForPlanning {
        var name: String
        var kind: SinkConfig.Kind
        var quietHours: QuietHours?
    }

    private final class CompiledRule: Sendable {
        let rule: Rule
        let events: RelayEvent.KindMask
        /// The rule's sinks that are configured, in its order.
        let sinks: [SinkForPlanning]

        init(_ rule: Rule, sinks: [String: SinkConfig]) {
            self.rule = rule
            events = RelayEvent.KindMask(rule.events)
            self.sinks = rule.to.compactMap { name in
                sinks[name].map { SinkForPlanning(name: name, kind: $0.kind, quietHours: $0.quietHours) }
            }
        }
    }

    public init(
        rules: [Rule], sinks: [String: SinkConfig], currency: String? = nil, mutes: MuteList? = nil,
        history: AlertSettings.HistoryMode = .all,
        now: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.rules = rules
        self.sinks = sinks
        self.currency = currency
        self.mutes = mutes
        self.history = history
        self.now = now
        compiled = rules.map { CompiledRule($0, sinks: sinks) }
        plannable = RelayEvent.KindMask(RelayEvent.Kind.allCases.filter { Self.mayPlan($0, rules) })
    }

    /// A transaction or balance change can also raise balance.low (and recovered); a transaction, balance.updated.
    public func mayPlan(for kind: RelayEvent.Kind) -> Bool { plannable.contains(kind) }

    private static func mayPlan(_ kind: RelayEvent.Kind, _ rules: [Rule]) -> Bool {
        let moves = kind == .transactionCreated || kind == .balanceUpdated
        return rules.contains { r in
            r.events.contains(kind) || kind == .summary && r.summary != nil || moves && r.events.contains(.balanceLow)
                || kind == .transactionCreated && r.events.contains(.balanceUpdated)
        }
    }

    /// What the current rules, quiet hours and mutes make of deliveries held earlier (`heldDeliveries`): a row whose
    /// quiet hours are gone or shorter falls due then; one whose child is muted on its sink now is muted. Rows whose
    /// rule or sink is gone keep their time.
    public func replan(_ held: [Delivery], now: Date) -> [(id: String, change: HeldChange)] {
        let rulesByName = Dictionary(rules.map { ($0.name, $0) }, uniquingKeysWith: { a, _ in a })
        return held.compactMap { d -> (String, HeldChange)? in
            guard d.urgency != .critical, d.kind != .summary, let rule = rulesByName[d.rule], let sink = sinks[d.sink]
            else { return nil }
            if let child = d.childId, mutes?.isMuted(sink: d.sink, child: child, at: now) == true {
                return (d.id, .muted("muted"))
            }
            let quiet = rule.quietHours ?? sink.quietHours
            let due = quiet.map { $0.contains(now) ? $0.end(after: now) : now } ?? now
            return abs(due.timeIntervalSince(d.nextAttemptAt)) < 1 ? nil : (d.id, .due(due))
        }
    }

    public func plan(_ e: RelayEvent) -> [PlannedDelivery] {
        if e.history, history == .none { return [] }  // a new relay starts from now
        let now = now()
        var planned: [PlannedDelivery] = []
        // The first rule that routes an alert of a kind to a sink decides how; a few pairs, compared in place.
        var taken: [(kind: RelayEvent.Kind, sink: String)] = []
        for compiledRule in compiled {
            let rule = compiledRule.rule
            for kind in rule.kinds(for: e, events: compiledRule.events) {
                for config in compiledRule.sinks where config.name != e.sink {
                    let sink = config.name
                    // Only a popup has something to take back when a low balance recovers.
                    if kind == .balanceRecovered, config.kind != .desktop { continue }
                    guard !taken.contains(where: { $0.kind == kind && $0.sink == sink }) else { continue }
                    taken.append((kind, sink))
                    var p = PlannedDelivery(sink: sink, rule: rule.name, kind: kind, urgency: rule.urgency)
                    // Recorded, not sent: `deliveries list --state muted` shows what a mute held back.
                    p.muted =
                        rule.urgency != .critical
                        && e.childId.map { mutes?.isMuted(sink: sink, child: $0, at: now) == true } == true
                    // `relay.history: digest` folds the history for every sink, machines too.
                    let foldable =
                        kind == .transactionCreated
                        && (e.history && history == .digest || rule.digest ?? !config.kind.isMachine)
                    if e.caughtUp && foldable {
                        p.digest = true
                        p.notBefore = now.addingTimeInterval(digestGathering)
                    }
                    // A summary comes at the time its rule asked for: quiet hours do not hold it.
                    if kind != .summary, rule.urgency != .critical,
                        let quiet = rule.quietHours ?? config.quietHours, quiet.contains(now)
                    {
                        p.notBefore = quiet.end(after: now)
                        p.digest = foldable
                    }
                    if let window = rule.dedupWindow {
                        p.dedupKey = "\(rule.name)|\(kind.rawValue)|\(e.childId?.lowercased ?? "-")"
                        p.dedupWindow = window
                    }
                    planned.append(p)
                }
            }
        }
        return planned
    }
}
