import Foundation
import TestSupport
import Testing

/// The layer rule of Package.swift, checked on the sources: a module imports only modules of lower layers, so
/// nothing reaches back up (and two modules of one layer, like Sync and Relay, do not know each other).
@Suite struct LayerTests {
    /// Bottom to top. A new module must be placed here, or this test fails.
    static let layers: [[String]] = [
        ["CLibWebSockets", "CCurl", "CLibCrypto", "CSystemd", "CMosquitto", "Core"],
        ["SignalRProtocol", "WebSocketTransport", "HTTPTransport", "MQTTTransport"],
        ["SignalRClient", "HubSimulator"],
        ["AllowanceAPI"],
        ["Alerts"],
        ["Store"],
        ["Sync", "Relay"],
        ["RelayDaemon"],
        ["allowance-relay", "allowance-hub-sim"],
    ]

    static func layer(_ module: String) -> Int? {
        // allowance-relay's module is allowance_relay.
        layers.firstIndex { $0.contains(module) || $0.contains(module.replacingOccurrences(of: "_", with: "-")) }
    }

    @Test func nothingReachesBackUp() throws {
        let sources = PythonPeer.root.appending(path: "Sources")
        let modules = try FileManager.default.contentsOfDirectory(atPath: sources.path).filter { !$0.hasPrefix(".") }
        #expect(modules.count >= 14)
        var violations: [String] = []
        for module in modules {
            guard let level = Self.layer(module) else {
                violations.append("\(module) has no layer in LayerTests.layers")
                continue
            }
            let files = FileManager.default.enumerator(atPath: sources.appending(path: module).path)?
                .compactMap { $0 as? String }.filter { $0.hasSuffix(".swift") } ?? []
            for file in files {
                let text = try String(contentsOf: sources.appending(path: module).appending(path: file), encoding: .utf8)
                for line in text.split(separator: "\n") {
                    let words = line.split(separator: " ")
                    guard let at = words.firstIndex(of: "import"), at + 1 < words.count,
                        words[..<at].allSatisfy({ $0.hasPrefix("@") || $0 == "public" || $0 == "internal" })
                    else { continue }
                    let imported = String(words[at + 1])
                    guard let other = Self.layer(imported) else { continue }  // a package from outside
                    if other >= level { violations.append("\(module)/\(file) imports \(imported) (layer \(other), not below \(level))") }
                }
            }
        }
        #expect(violations.isEmpty, "\(violations.joined(separator: "\n"))")
    }
}
