import Core
import Foundation
import TestSupport
import Testing

/// The layer rule, checked on the package manifest (`swift package dump-package`) and on the sources: a module
/// declares only modules of lower layers, the domain does not reach the WebSocket client even through another
/// module, and every module a source file imports is declared by its target.
@Suite struct LayerTests {
    /// Bottom to top, as the `// layer:` lines of Package.swift's header say: the one list of the layers.
    static let layers: [[String]] = {
        let manifest =
            (try? String(contentsOf: PythonPeer.root.appending(path: "Package.swift"), encoding: .utf8)) ?? ""
        return manifest.split(separator: "\n").compactMap { line in
            guard line.hasPrefix("// layer:") else { return nil }
            return line.dropFirst("// layer:".count).split(separator: " ").map(String.init)
        }
    }()
    /// What the domain must not depend on, directly or through another module: the connection and its socket.
    static let domain = ["AllowanceAPI", "Alerts", "Config", "StoreContract", "Store", "SharedStore", "Sync", "Relay"]
    static let connection: Set = ["SignalRClient", "WebSocketTransport"]
    /// Modules of the toolchain: imported without a declaration.
    static let toolchain: Set = [
        "Foundation", "FoundationEssentials", "FoundationNetworking", "Glibc", "Musl", "Darwin", "Synchronization",
        "Dispatch", "Testing", "XCTest", "_Concurrency",
    ]
    /// Products whose library holds more modules than the one named like it.
    static let productModules = ["Metrics": ["Metrics", "CoreMetrics"]]

    struct Target {
        let name: String
        let kind: String
        let path: String
        /// Targets of this package, and modules of other packages' products.
        let targets: [String]
        let products: [String]
    }

    /// The targets, read once; off the pool, for `swift package dump-package` can take many seconds on a fresh clone.
    static func targets() async throws -> [String: Target] {
        try await offThread(named: "test-harness") { try manifest.get() }
    }

    static let manifest: Result<[String: Target], ManifestError> = {
        // Its own scratch folder: `swift test` holds the lock on .build while the tests run.
        let scratch = FileManager.default.temporaryDirectory.appending(path: "layer-tests-\(getpid())")
        defer { try? FileManager.default.removeItem(at: scratch) }
        let out = Pipe()
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = [
            "swift", "package", "--package-path", PythonPeer.root.path, "--scratch-path", scratch.path, "dump-package",
        ]
        process.standardOutput = out
        process.standardError = FileHandle.nullDevice
        do { try process.run() } catch { return .failure(ManifestError(message: "cannot run swift: \(error)")) }
        let data = out.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0,
            let json = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
            let targets = json["targets"] as? [[String: Any]]
        else {
            return .failure(ManifestError(message: "swift package dump-package failed (\(process.terminationStatus))"))
        }
        var byName: [String: Target] = [:]
        for t in targets {
            guard let name = t["name"] as? String, let kind = t["type"] as? String else { continue }
            var local: [String] = []
            var products: [String] = []
            for dependency in t["dependencies"] as? [[String: [Any]]] ?? [] {
                for (how, values) in dependency {
                    guard let dependencyName = values.first as? String else { continue }
                    if how == "product" { products.append(dependencyName) } else { local.append(dependencyName) }
                }
            }
            let folder = kind == "test" ? "Tests" : kind == "plugin" ? "Plugins" : "Sources"
            byName[name] = Target(
                name: name, kind: kind, path: t["path"] as? String ?? "\(folder)/\(name)", targets: local,
                products: products)
        }
        return .success(byName)
    }()

    struct ManifestError: Error, CustomStringConvertible {
        let message: String
        var description: String { message }
    }

    static func layer(_ module: String) -> Int? {
        layers.firstIndex { $0.contains(module) }
    }

    /// The modules `target` reaches through its declared dependencies on this package's targets.
    static func closure(of target: String, in targets: [String: Target]) -> Set<String> {
        var seen: Set<String> = []
        var next = targets[target]?.targets ?? []
        while let module = next.popLast() {
            guard seen.insert(module).inserted else { continue }
            next += targets[module]?.targets ?? []
        }
        return seen
    }

    @Test func everyDeclaredDependencyPointsDown() async throws {
        let targets = try await Self.targets()
        var violations: [String] = []
        for target in targets.values where target.path.hasPrefix("Sources/") {
            guard let level = Self.layer(target.name) else {
                violations.append("\(target.name) has no layer: add it to a `// layer:` line of Package.swift")
                continue
            }
            for dependency in target.targets {
                guard let other = Self.layer(dependency) else { continue }
                if other >= level {
                    violations.append("\(target.name) depends on \(dependency) (layer \(other), not below \(level))")
                }
            }
        }
        #expect(targets["Store"]?.targets.contains("Alerts") == true, "the manifest was read")
        #expect(Self.layers.count >= 10, "the layer lines were read: \(Self.layers)")
        #expect(violations.isEmpty, "\(violations.sorted().joined(separator: "\n"))")
    }

    @Test func theDomainDoesNotReachTheConnection() async throws {
        let targets = try await Self.targets()
        for module in Self.domain {
            let reached = Self.closure(of: module, in: targets)
            #expect(reached.contains("Core"), "\(module)'s dependencies were read")
            #expect(
                reached.isDisjoint(with: Self.connection),
                "\(module) reaches \(reached.intersection(Self.connection).sorted())")
        }
        // The rule can fail: the daemon does reach the connection.
        #expect(Self.closure(of: "RelayDaemon", in: targets).contains("SignalRClient"))
    }

    /// The stand-in backend has its own codec: a module it shared with the client would let a bug on one side be
    /// mirrored on the other and pass every end-to-end test.
    @Test func theSimulatorSharesNoModuleWithTheClient() async throws {
        let targets = try await Self.targets()
        let client = Self.closure(of: "SignalRClient", in: targets).union(["SignalRClient"])
        let simulator = Self.closure(of: "HubSimulator", in: targets)
        #expect(client.contains("SignalRProtocol") && client.contains("Core"), "the client's modules were read")
        #expect(simulator.isDisjoint(with: client), "HubSimulator reaches \(simulator.intersection(client).sorted())")
    }

    @Test func everyImportIsDeclared() async throws {
        let targets = try await Self.targets()
        var violations: [String] = []
        var checkedImports = 0
        for target in targets.values where target.kind != "system" {
            // A plugin links PackagePlugin, SwiftPM's own.
            var declared = Self.toolchain.union(target.targets).union(target.kind == "plugin" ? ["PackagePlugin"] : [])
            for product in target.products { declared.formUnion(Self.productModules[product] ?? [product]) }
            for (file, text) in try Self.sources(of: target) {
                for imported in Self.imports(in: text) {
                    checkedImports += 1
                    if !declared.contains(imported)
                        && !declared.contains(imported.replacingOccurrences(of: "_", with: "-"))
                    {
                        violations.append(
                            "\(target.path)/\(file) imports \(imported), which \(target.name) does not declare")
                    }
                }
            }
        }
        #expect(checkedImports > 100)
        #expect(violations.isEmpty, "\(violations.sorted().joined(separator: "\n"))")
    }

    /// The other way round: a dependency no file of the target imports only misleads the manifest's reader (and
    /// links a module for nothing).
    @Test func everyDeclaredDependencyIsImported() async throws {
        let targets = try await Self.targets()
        var unused: [String] = []
        for target in targets.values where target.kind != "system" && target.kind != "plugin" {
            let imported = Set(try Self.sources(of: target).flatMap { Self.imports(in: $0.text) })
            // A program a test target declares is built for it to run, not imported.
            for module in target.targets
            where targets[module]?.kind != "executable"
                && !imported.contains(module.replacingOccurrences(of: "-", with: "_"))
            {
                unused.append("\(target.name) declares \(module) and imports it nowhere")
            }
            for product in target.products where imported.isDisjoint(with: Self.productModules[product] ?? [product]) {
                unused.append("\(target.name) declares the product \(product) and imports it nowhere")
            }
        }
        #expect(targets["allowance-relay"]?.products.contains("ArgumentParser") == true, "the manifest was read")
        #expect(unused.isEmpty, "\(unused.sorted().joined(separator: "\n"))")
    }

    /// The Swift files of a target's folder, with their text.
    static func sources(of target: Target) throws -> [(file: String, text: String)] {
        let folder = PythonPeer.root.appending(path: target.path)
        let files =
            FileManager.default.enumerator(atPath: folder.path)?.compactMap { $0 as? String }.filter {
                $0.hasSuffix(".swift")
            } ?? []
        return try files.map { ($0, try String(contentsOf: folder.appending(path: $0), encoding: .utf8)) }
    }

    @Test func everyLibraryHasATestTargetOfItsOwn() async throws {
        let targets = try await Self.targets()
        let libraries = targets.values.filter { $0.kind == "regular" && $0.path.hasPrefix("Sources/") }.map(\.name)
        #expect(libraries.count >= 14)
        let missing = libraries.filter { targets["\($0)Tests"]?.kind != "test" }
        #expect(missing.isEmpty, "no test target for \(missing.sorted())")
    }

    /// `make docs` (part of `make test`) builds every library's documentation, warnings as errors.
    @Test func everyLibrarysDocumentationIsBuilt() async throws {
        let targets = try await Self.targets()
        let libraries = Set(targets.values.filter { $0.kind == "regular" && $0.path.hasPrefix("Sources/") }.map(\.name))
        // Continued lines joined: the list goes on over lines that end in a backslash.
        let makefile = try String(contentsOf: PythonPeer.root.appending(path: "Makefile"), encoding: .utf8)
            .replacingOccurrences(of: "\\\n", with: " ")
        let line = try #require(makefile.split(separator: "\n").first { $0.hasPrefix("DOC_TARGETS :=") })
        let documented = Set(
            line.dropFirst("DOC_TARGETS :=".count).split(whereSeparator: \.isWhitespace).map(String.init))
        #expect(libraries.count >= 14)
        #expect(
            libraries.subtracting(documented).isEmpty,
            "not in DOC_TARGETS: \(libraries.subtracting(documented).sorted())")
    }

    /// One job per file: a file that grows past this has two (split it along its seams). Sources, tests,
    /// benchmarks and the fuzzer alike, counted as the formatter writes them (`make lint` keeps them so).
    @Test func noSwiftFileOutgrowsOneJob() throws {
        let root = PythonPeer.root
        let files = ["Sources", "Tests", "Benchmarks", "Fuzz", "Examples", "Plugins"].flatMap { folder in
            (FileManager.default.enumerator(atPath: root.appending(path: folder).path)?.compactMap { $0 as? String }
                ?? [])
                .filter { $0.hasSuffix(".swift") && !$0.contains(".build/") }.map { "\(folder)/\($0)" }
        }
        #expect(files.count > 200)
        let long = try files.compactMap { file -> String? in
            let lines = try String(contentsOf: root.appending(path: file), encoding: .utf8).split(
                separator: "\n", omittingEmptySubsequences: false
            ).count
            return lines > 460 ? "\(file): \(lines) lines" : nil
        }
        #expect(long.isEmpty, "\(long.sorted().joined(separator: "\n"))")
    }

    /// The modules named by `import` lines (with attributes and access levels), outside `#if` conditions too.
    static func imports(in text: String) -> [String] {
        text.split(separator: "\n").compactMap { line in
            let words = line.split(separator: " ")
            guard let at = words.firstIndex(of: "import"), at + 1 < words.count,
                words[..<at].allSatisfy({
                    $0.hasPrefix("@") || ["public", "internal", "package", "private", "fileprivate"].contains($0)
                })
            else { return nil }
            // `import struct Logging.Logger` names the module after the kind.
            let kinds: Set<Substring> = ["struct", "class", "enum", "protocol", "func", "var", "let", "typealias"]
            let name = kinds.contains(words[at + 1]) && at + 2 < words.count ? words[at + 2] : words[at + 1]
            return String(name.split(separator: ".").first ?? name)
        }
    }

    @Test func importLinesAreRead() {
        #expect(
            Self.imports(
                in: "import Foundation\n@_exported import Core\npublic import struct Logging.Logger\n// import No") == [
                    "Foundation", "Core", "Logging",
                ])
    }
}
