import CSystemd
import Foundation
import Store
import Synchronization

/// Desktop popups: `org.freedesktop.Notifications.Notify` on the session bus through sd-bus. A balance popup
/// replaces the child's previous one (one `replaces_id` per child) instead of stacking up.
public final class DesktopSink: Sink {
    public let config: SinkConfig
    private let popups = Mutex<[UUID: UInt32]>([:])

    init(config: SinkConfig) {
        self.config = config
    }

    public func supportsMarkup() async -> Bool {
        var err = [CChar](repeating: 0, count: 512)
        return clsd_body_markup(&err, err.count) == 1
    }

    public func send(_ m: Message) async -> DeliveryOutcome {
        let balancePopup = m.kind == .balanceUpdated || m.kind == .balanceLow
        let child = m.event.childId
        let replaces = balancePopup ? child.flatMap { c in popups.withLock { $0[c] } } ?? 0 : 0
        let urgency: UInt8 = ["low": 0, "normal": 1, "critical": 2][m.urgency.rawValue]!
        let category = m.kind == .transactionCreated || m.kind == .digest ? "transfer.complete" : "im.received"
        var id: UInt32 = 0
        var err = [CChar](repeating: 0, count: 512)
        // Critical popups stay until dismissed (the spec); the others use the server's default.
        let r = clsd_notify(
            "allowance-relay", replaces, "dialog-information", m.title, m.text, urgency, category, "allowance-relay",
            m.urgency == .critical ? 0 : -1, &id, &err, err.count)
        guard r >= 0 else {
            let reason = String(cString: err)
            let noServer = reason.contains("ServiceUnknown") || reason.contains("Error.Spawn")
            return .unavailable("desktop: \(reason)" + (noServer ? " (no notification server in this session)" : ""))
        }
        if balancePopup, let child { popups.withLock { $0[child] = id } }
        return .delivered
    }
}
