import Foundation

/// This process's threads as the kernel names them (`/proc`, what `top -H` shows): for tests of which thread ran what.
public enum ProcessThreads {
    /// The calling thread's name.
    public static func current() -> String {
        ((try? String(contentsOfFile: "/proc/thread-self/comm", encoding: .utf8)) ?? "?")
            .trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// The names of every thread of the process, one per thread.
    public static func names() -> [String] {
        let ids = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []
        return ids.compactMap { try? String(contentsOfFile: "/proc/self/task/\($0)/comm", encoding: .utf8) }
            .map { $0.trimmingCharacters(in: .whitespacesAndNewlines) }
    }

    /// Each thread of process `pid`: its name and how many times it has gone to sleep (its voluntary context
    /// switches, as /proc counts them): where another process's wake-ups come from.
    public static func sleeps(of pid: Int32) -> [(name: String, switches: Int)] {
        let ids = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []
        return ids.compactMap { id in
            guard let name = try? String(contentsOfFile: "/proc/\(pid)/task/\(id)/comm", encoding: .utf8),
                let status = try? String(contentsOfFile: "/proc/\(pid)/task/\(id)/status", encoding: .utf8),
                let line = status.split(separator: "\n").first(where: { $0.hasPrefix("voluntary_ctxt_switches:") }),
                let count = Int(line.split(separator: "\t").last ?? "")
            else { return nil }
            return (name.trimmingCharacters(in: .whitespacesAndNewlines), count)
        }
    }

    /// Once this process's thread named `name` has gone to sleep (a wait it was started for has begun); false when
    /// it has not within `timeout`.
    public static func asleep(_ name: String, within timeout: Duration = .seconds(10)) async -> Bool {
        await eventually(timeout) { sleeps(of: getpid()).contains { $0.name == name && $0.switches > 0 } }
    }

    /// How many times all of process `pid`'s threads have gone to sleep so far.
    public static func allSleeps(of pid: Int32) -> Int {
        sleeps(of: pid).reduce(0) { $0 + $1.switches }
    }

    /// How many times process `pid`'s threads named `name` went to sleep during `window`, once such a thread exists
    /// (nil: none came within 10 s). The window is the measurement: a timer of period p shows window / p times.
    public static func sleeps(of pid: Int32, named name: String, over window: Duration) async throws -> Int? {
        let count = { () -> Int? in
            let threads = sleeps(of: pid).filter { $0.name == name }
            return threads.isEmpty ? nil : threads.map(\.switches).reduce(0, +)
        }
        guard await eventually(.seconds(10), { count() != nil }), let before = count() else { return nil }
        try await Task.sleep(for: window)
        return (count() ?? before) - before
    }
}
