import Alerts
import AllowanceAPI
import CSystemd
import Config
import Core
import Foundation
import Logging
import StoreContract
import Synchronization

/// Desktop popups: `org.freedesktop.Notifications.Notify` on the session bus through sd-bus.
/// - A child's balance popup replaces the child's previous one (`replaces_id`) instead of stacking up, and so does
///   the low-balance popup, which is closed when the balance recovers. The ids are kept in `ids` (the store), so
///   this holds across a restart of the relay too.
/// - The transactions of a burst make one popup per child, updated in place while the burst lasts.
/// - A click opens the alert's link with the desktop's URL handler (`xdg-open`); "Mute today" silences this sink
///   for the child until midnight in the family's time zone.
/// - A summary shows its chart (the `image-path` hint, a file kept per child: `DesktopPictures`).
/// - Every popup carries the relay's icon, an `x-allowance.*` category and the `desktop-entry` hint that ties it to
///   `allowance-relay.desktop` (GNOME lists and groups the app's notifications by it).
public final class DesktopSink: Sink {
    public let config: SinkConfig
    private let ids: (any PopupIds)?
    private let mutes: MuteList?
    private let timeZone: TimeZone
    private let logger: Logger
    private let icon: String
    /// Also the only memory without `ids` (`notify test`): remembered for this process only.
    private let popups = Mutex<[String: UInt32]>([:])
    /// What a click on a popup shown by this process means: its link and its child.
    private let clickable = Mutex<[UInt32: (link: String?, child: UUID?, name: String)]>([:])
    /// Per child, the transaction popup of the burst under way.
    private let bursts = Mutex<[UUID: Burst]>([:])
    private let bus = DesktopBus()
    private let pictures: DesktopPictures

    /// How long after a child's last transaction popup the next one still joins it.
    static let burstWindow: TimeInterval = 10

    struct Burst {
        var id: UInt32
        var last: Date
        var lines: [String]
    }

    init(
        config: SinkConfig, ids: (any PopupIds)? = nil, mutes: MuteList? = nil, timeZone: TimeZone = .current,
        logger: Logger? = nil, pictures: DesktopPictures = DesktopPictures()
    ) {
        self.config = config
        self.pictures = pictures
        self.ids = ids
        self.mutes = mutes
        self.timeZone = timeZone
        self.logger = logger ?? Logger(label: "allowance-relay")
        icon = Self.icon(config)
        bus.onAction { [weak self] id, key in
            // Off the bus's thread: opening a browser or writing the store must not hold the connection.
            Task { await self?.clicked(id, key) }
        }
    }

    deinit { bus.close() }

    public func close() async { bus.close() }

    public func supportsMarkup() async -> Bool {
        (try? await bus.perform { $0.call { clsd_body_markup($0, $1, $2) } }.get()) == 1
    }

    /// The icon every popup shows: the sink's `icon` (a path or a theme name), else the installed one (install.sh,
    /// the Debian package), found where the XDG base directories say a theme looks; run from a checkout (not
    /// installed), the checkout's own file by its file:// URI, which the spec's app_icon takes. Looked up once.
    static func icon(
        _ config: SinkConfig, environment: [String: String] = ProcessInfo.processInfo.environment,
        executable: URL? = Bundle.main.executableURL
    ) -> String {
        if let icon = config.icon { return icon }
        let home = environment["XDG_DATA_HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? NSHomeDirectory() + "/.local/share"
        let dirs = environment["XDG_DATA_DIRS"].flatMap { $0.isEmpty ? nil : $0 } ?? "/usr/local/share:/usr/share"
        let installed = ([home] + dirs.split(separator: ":").map(String.init)).contains {
            FileManager.default.fileExists(atPath: $0 + "/icons/hicolor/scalable/apps/allowance-relay.svg")
        }
        if installed { return "allowance-relay" }
        // .build/<triple>/debug/allowance-relay: the checkout is a few folders up.
        var folder = executable?.resolvingSymlinksInPath().deletingLastPathComponent()
        for _ in 0..<5 {
            guard let here = folder else { break }
            let file = here.appending(path: "deploy/icons/allowance-relay.svg")
            if FileManager.default.fileExists(atPath: file.path) { return file.absoluteString }
            folder = here.deletingLastPathComponent()
        }
        return "dialog-information"
    }

    static func category(_ kind: RelayEvent.Kind) -> String {
        switch kind {
        case .transactionCreated, .digest: "x-allowance.transaction"
        case .balanceUpdated, .balanceRecovered: "x-allowance.balance"
        case .balanceLow: "x-allowance.balance.low"
        case .summary: "x-allowance.summary"
        case .goalReached, .goalPurchased: "x-allowance.goal"
        default: "x-allowance.system"
        }
    }

    public func send(_ m: Message) async -> DeliveryOutcome {
        let child = m.childId
        if m.kind == .balanceRecovered {
            guard let child, let id = popup(child, .low) else { return .delivered }  // nothing on screen to close
            if case .failure(let e) = await bus.perform({ $0.call { clsd_close($0, id, $1, $2) } }) {
                return Self.unavailable(e.message)
            }
            remember(child, .low, nil)
            return .delivered
        }
        var title = m.title
        var text = m.text
        let role: PopupRole? = m.kind == .balanceUpdated ? .balance : m.kind == .balanceLow ? .low : nil
        var replaces = role.flatMap { r in child.flatMap { popup($0, r) } } ?? 0
        let name = m.childName
        if m.kind == .transactionCreated, let child, let burst = burst(child, adding: text) {
            replaces = burst.id
            title = "\(name.isEmpty ? "Transactions" : name): \(burst.lines.count) transactions"
            text =
                burst.lines.suffix(4).joined(separator: "\n")
                + (burst.lines.count > 4 ? "\n(and \(burst.lines.count - 4) before)" : "")
        }
        let urgency: UInt8 = ["low": 0, "normal": 1, "critical": 2][m.urgency.rawValue]!
        // A click on the popup opens the link; "Mute today" needs a child to mute.
        var actions: [String] = []
        // One "Open": the default action is what a click does, and servers that list actions show it by its label.
        if let link = m.link, !link.isEmpty { actions += ["default", "Open"] }
        if child != nil { actions += ["mute", "Mute today"] }
        let category = Self.category(m.kind)
        // Critical popups stay until dismissed (the spec); the others use the server's default.
        let timeout: Int32 = m.urgency == .critical ? 0 : -1
        // A summary's chart: the server reads the file when it draws the popup. Without it, the text alone.
        var picture: String?
        if let image = m.image {
            do { picture = try pictures.store(image, as: "chart-\(child?.lowercased ?? "family").png") } catch {
                logger.warning("sink \(config.name): the summary goes without its chart: \(error)")
            }
        }
        let result = await bus.perform {
            [icon, title, text, picture, actions, replaces] desktop -> Result<UInt32, RelayError> in
            var id: UInt32 = 0
            return desktop.call { bus, err, len in
                let cActions = actions.map { strdup($0) }
                defer { cActions.forEach { free($0) } }
                return cActions.map { UnsafePointer($0) }.withUnsafeBufferPointer { list in
                    clsd_notify(
                        bus, "allowance-relay", replaces, icon, title, text,
                        UnsafeMutablePointer(mutating: list.baseAddress), Int32(actions.count),
                        urgency, category, "allowance-relay", picture, timeout, &id, err, len)
                }
            }.map { _ in id }
        }
        let id: UInt32
        switch result {
        case .success(let shown): id = shown
        case .failure(let e): return Self.unavailable(e.message)
        }
        if let role, let child { remember(child, role, id) }
        if m.kind == .transactionCreated, let child { bursts.withLock { $0[child]?.id = id } }
        clickable.withLock { c in
            c[id] = (m.link, child, name)
            // Only popups still likely on screen matter: the oldest ids go (servers count ids up).
            if c.count > 256 { for old in c.keys.sorted().prefix(c.count - 256) { c[old] = nil } }
        }
        return .delivered
    }

    /// The burst this transaction joins (with its line added), or nil when it starts a new one.
    private func burst(_ child: UUID, adding line: String) -> Burst? {
        let now = Date()
        return bursts.withLock { b in
            if var burst = b[child], now.timeIntervalSince(burst.last) < Self.burstWindow {
                burst.lines.append(line)
                burst.last = now
                b[child] = burst
                return burst
            }
            b[child] = Burst(id: 0, last: now, lines: [line])
            return nil
        }
    }

    /// A click on one of our popups: open its link, or mute its child for today.
    func clicked(_ id: UInt32, _ key: String) async {
        guard let target = clickable.withLock({ $0[id] }) else { return }  // another app's popup, or an older relay's
        switch key {
        case "default", "open":
            guard let link = target.link else { return }
            open(link)
        case "mute":
            guard let child = target.child, let mutes else { return }
            do {
                let until = try mutes.muteForToday(sink: config.name, child: child, timeZone: timeZone)
                logger.notice(
                    "sink \(config.name): alerts about \(target.name.isEmpty ? child.lowercased : target.name) muted until \(LocalTime.text(until, timeZone)) (Mute today)"
                )
            } catch {
                logger.error("sink \(config.name): could not store the mute: \(error)")
            }
            _ = await bus.perform { $0.call { clsd_close($0, id, $1, $2) } }
        default:
            return
        }
    }

    /// Hands the link to the desktop's URL handler (the browser the user chose), without waiting for it.
    private func open(_ link: String) {
        guard let url = URL(string: link), ["http", "https"].contains(url.scheme?.lowercased() ?? "") else {
            logger.warning("sink \(config.name): not opening \(link.prefix(80)): only http and https links are opened")
            return
        }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["xdg-open", link]
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        do {
            try process.run()
            logger.info("sink \(config.name): opened \(URL(string: link)?.originForLogs ?? "the link") (popup clicked)")
        } catch {
            logger.warning("sink \(config.name): cannot run xdg-open to open the link: \(error) (install xdg-utils)")
        }
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
