import Foundation

/// Whether a process has a handler for a signal, as Linux shows it (`SigCgt` in /proc/PID/status): the one way to
/// ask another process before sending it a signal whose default would end it.
public enum SignalDisposition {
    public static func caught(_ signal: Int32, by pid: Int32) -> Bool {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
            let line = status.split(separator: "\n").first(where: { $0.hasPrefix("SigCgt:") }),
            let mask = UInt64(line.dropFirst("SigCgt:".count).trimmingCharacters(in: .whitespaces), radix: 16)
        else { return false }
        return mask & (1 << UInt64(signal - 1)) != 0
    }
}
