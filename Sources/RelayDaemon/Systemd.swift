import CSystemd
import Foundation

/// Talks to systemd when it runs us as `Type=notify` (`NOTIFY_SOCKET` is set): READY=1 once running, STATUS=
/// lines for `systemctl status`, WATCHDOG=1 pings at half the `WatchdogSec` interval. Without systemd every call
/// does nothing.
enum Systemd {
    static func notify(_ state: String) {
        _ = sd_notify(0, state)
    }

    static func ready(status: String) { notify("READY=1\nSTATUS=\(status)") }

    static func status(_ text: String) { notify("STATUS=\(text)") }

    /// Around a SIGHUP reload (what `Type=notify-reload` expects; harmless for `Type=notify`).
    static func reloading() {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        notify(
            "RELOADING=1\nSTATUS=reloading the configuration\nMONOTONIC_USEC=\(UInt64(now.tv_sec) * 1_000_000 + UInt64(now.tv_nsec) / 1000)"
        )
    }

    static func reloaded() { notify("READY=1\nSTATUS=configuration reloaded") }

    static func stopping() { notify("STOPPING=1\nSTATUS=stopping") }

    /// Pings the watchdog until cancelled, if systemd asked for it.
    static func watchdog() async {
        var usec: UInt64 = 0
        guard sd_watchdog_enabled(0, &usec) > 0, usec > 0 else { return }
        let interval = Duration.microseconds(Int64(usec / 2))
        while !Task.isCancelled {
            notify("WATCHDOG=1")
            try? await Task.sleep(for: interval)
        }
    }
}
