import CSystemd
import Foundation
import Store
import Synchronization

/// Desktop popups: `org.freedesktop.Notifications.Notify` on the session bus through sd-bus. A child's balance
/// popup replaces the child's previous one (`replaces_id`) instead of stacking up, and so does the low-balance
/// popup, which is closed when the balance recovers. The ids are kept in `ids` (the store), so this holds across a
/// restart of the relay too.
public final class DesktopSink: Sink {
    public let config: SinkConfig
    private let ids: (any PopupIds)?
    /// Also the only memory without `ids` (`notify test`): remembered for this process only.
    private let popups = Mutex<[String: UInt32]>([:])

    init(config: SinkConfig, ids: (any PopupIds)? = nil) {
        self.config = config
        self.ids = ids
    }

    public func supportsMarkup() async -> Bool {
        var err = [CChar](repeating: 0, count: 512)
        return clsd_body_markup(&err, err.count) == 1
    }

    public func send(_ m: Message) async -> DeliveryOutcome {
        let child = m.childId
        if m.kind == .balanceRecovered {
            guard let child, let id = popup(child, .low) else { return .delivered }  // nothing on screen to close
            var err = [CChar](repeating: 0, count: 512)
            guard clsd_close(id, &err, err.count) >= 0 else { return Self.unavailable(String(cString: err)) }
            remember(child, .low, nil)
            return .delivered
        }
        let role: PopupRole? = m.kind == .balanceUpdated ? .balance : m.kind == .balanceLow ? .low : nil
        let replaces = role.flatMap { r in child.flatMap { popup($0, r) } } ?? 0
        let urgency: UInt8 = ["low": 0, "normal": 1, "critical": 2][m.urgency.rawValue]!
        let category = m.kind == .transactionCreated || m.kind == .digest ? "transfer.complete" : "im.received"
        var id: UInt32 = 0
        var err = [CChar](repeating: 0, count: 512)
        // Critical popups stay until dismissed (the spec); the others use the server's default.
        let r = clsd_notify(
            "allowance-relay", replaces, "dialog-information", m.title, m.text, urgency, category, "allowance-relay",
            m.urgency == .critical ? 0 : -1, &id, &err, err.count)
        guard r >= 0 else { return Self.unavailable(String(cString: err)) }
        if let role, let child { remember(child, role, id) }
        return .delivered
    }

    private static func unavailable(_ reason: String) -> DeliveryOutcome {
        let noServer = reason.contains("ServiceUnknown") || reason.contains("Error.Spawn")
        // Typical of a system service or an ssh shell: popups need the desktop user's own session bus.
        let noBus = reason.contains("cannot connect to the session bus")
        let hint =
            noServer
            ? " (no notification server in this session)"
            : noBus
                ? " (popups need the desktop user's session bus: run the relay as that user's service, `systemctl --user`,"
                    + " or set DBUS_SESSION_BUS_ADDRESS to that session's bus, e.g. unix:path=/run/user/1000/bus)" : ""
        return .unavailable("desktop: \(reason)\(hint)")
    }

    private func popup(_ child: UUID, _ role: PopupRole) -> UInt32? {
        if let id = popups.withLock({ $0["\(child)|\(role)"] }) { return id }
        return (try? ids?.popup(sink: config.name, child: child, role: role)) ?? nil
    }

    /// A popup id that cannot be stored only costs a stacked popup later: not worth failing the delivery.
    private func remember(_ child: UUID, _ role: PopupRole, _ id: UInt32?) {
        popups.withLock { $0["\(child)|\(role)"] = id }
        try? ids?.setPopup(sink: config.name, child: child, role: role, id: id)
    }
}
