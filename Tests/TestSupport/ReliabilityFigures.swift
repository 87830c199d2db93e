import Foundation

/// The figures of a fault scenario (events checked, alerts checked, kills, lost...), one JSON line per run in
/// `.build/test-artifacts/reliability.jsonl` (or `$ALLOWANCE_RELIABILITY_FIGURES`). `make reliability` turns
/// them into RELIABILITY.md's table of the last run.
public enum ReliabilityFigures {
    public static func record(_ scenario: String, _ figures: [(String, Int)]) {
        let path =
            ProcessInfo.processInfo.environment["ALLOWANCE_RELIABILITY_FIGURES"]
            ?? ".build/test-artifacts/reliability.jsonl"
        var object: [String: Any] = ["scenario": scenario, "at": ISO8601DateFormatter().string(from: Date())]
        for (k, v) in figures { object[k] = v }
        guard let data = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]) else { return }
        try? FileManager.default.createDirectory(
            atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        let fd = open(path, O_WRONLY | O_CREAT | O_APPEND, 0o644)
        guard fd >= 0 else { return }
        defer { close(fd) }
        let line = Array(data) + [0x0A]
        // one write: lines of parallel tests stay whole
        _ = line.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
    }
}
