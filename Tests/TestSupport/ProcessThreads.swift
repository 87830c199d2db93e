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
}
