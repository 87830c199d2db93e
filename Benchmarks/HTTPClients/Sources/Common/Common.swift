import Foundation
import Glibc

public let body: [UInt8] = Array(
    ("{\"type\":\"transaction.created\",\"timestamp\":\"2026-11-23T06:00:00Z\",\"data\":"
        + "{\"kind\":\"transaction.created\",\"at\":\"2026-11-23T06:00:00.123Z\",\"child\":{\"id\":\"8d1c4f0e-4b8e-4f43-9d3e-2b7a9d0c1e55\",\"name\":\"Emma\"},\"transaction\":{\"id\":\"0b9e5c1a-7f53-4a0c-9d2e-6b1f2d3c4e5f\",\"amount\":\"12.50\",\"type\":\"Credit\",\"description\":\"Weekly allowance\",\"balanceAfter\":\"112.50\",\"createdAt\":\"2026-11-23T06:00:00.120Z\",\"createdByName\":\"Dad\"},\"balance\":\"112.50\",\"previousBalance\":\"100.00\",\"currency\":\"USD\"}}")
        .utf8)

public func cpuSeconds() -> Double {
    var u = rusage()
    getrusage(Int32(RUSAGE_SELF.rawValue), &u)
    return Double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + Double(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6
}
public func rssKiB(_ key: String) -> Int {
    let s = (try? String(contentsOfFile: "/proc/self/status", encoding: .utf8)) ?? ""
    for line in s.split(separator: "\n") where line.hasPrefix(key + ":") {
        return Int(line.split(separator: " ", omittingEmptySubsequences: true)[1]) ?? 0
    }
    return 0
}
public func percentile(_ v: [Double], _ p: Double) -> Double {
    let s = v.sorted()
    return s[min(s.count - 1, max(0, Int((p / 100 * Double(s.count)).rounded(.up)) - 1))]
}
/// args: url n concurrency
public func run(name: String, _ send: @escaping @Sendable () async throws -> Int) async {
    let a = CommandLine.arguments
    let n = Int(a[2])!
    let c = Int(a[3])!
    let idle = rssKiB("VmRSS")
    // warm up (connection, TLS none)
    _ = try? await send()
    let cpu0 = cpuSeconds()
    let t0 = Date()
    let lat = await withTaskGroup(of: [Double].self) { g in
        for w in 0..<c {
            g.addTask {
                var out: [Double] = []
                var i = w
                while i < n {
                    let s = Date()
                    let st = (try? await send()) ?? -1
                    if st != 204 { print("status \(st)") }
                    out.append(Date().timeIntervalSince(s) * 1000)
                    i += c
                }
                return out
            }
        }
        var all: [Double] = []
        for await x in g { all += x }
        return all
    }
    let wall = Date().timeIntervalSince(t0)
    let cpu = cpuSeconds() - cpu0
    print(
        "{\"client\":\"\(name)\",\"n\":\(n),\"concurrency\":\(c),\"per_s\":\(Int(Double(n)/wall)),\"p50_ms\":\(percentile(lat,50)),\"p99_ms\":\(percentile(lat,99)),\"cpu_us_per_req\":\(Int(cpu/Double(n)*1e6)),\"rss_before_kib\":\(idle),\"rss_kib\":\(rssKiB("VmRSS")),\"hwm_kib\":\(rssKiB("VmHWM"))}"
    )
}
