import AllowanceAPI
import Core
import Foundation
import SignalRProtocol
import Store
import Synchronization
import TestSupport
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// `config check` and `run` on broken and well-placed configuration files: every mistake with its file, line,
/// key and fix, as the program prints it.
@Suite(.timeLimit(.minutes(2))) struct ConfigCommandTests {
    @Test func theConfigFindsItselfAndItsPathsAndABrokenOneIsRefusedEverywhere() async throws {
        let home = FileManager.default.temporaryDirectory.appending(path: "relay-xdg-\(UUID())")
        let folder = home.appending(path: "allowance-relay")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let file = folder.appending(path: "relay.yaml").path
        try "store:\n  path: data/relay.sqlite\n".write(toFile: file, atomically: true, encoding: .utf8)
        let env = ["XDG_CONFIG_HOME": home.path, "ALLOWANCE_RELAY_STORE_PATH": ""]
        let status = try RelayProcess(env: env, arguments: ["status"])
        #expect(await status.wait() != 0)
        #expect(status.output.contains("No database at \(folder.path)/data/relay.sqlite yet"), "\(status.output)")
        // The same file, broken: `status` refuses it as `config check` and `run` do, with the one mistake.
        try
            "store:\n  path: data/relay.sqlite\nsinks:\n  hook:\n    type: webhook\n    url: https://h.example.org/x\n    concurrency: yes\nrules:\n  - event: transaction.created\n    to: hook\n"
            .write(toFile: file, atomically: true, encoding: .utf8)
        let refused = try RelayProcess(env: env, arguments: ["status"])
        #expect(await refused.wait() == 78)
        #expect(
            refused.output.contains("allowance-relay: configuration error:\n  \(file):7:18: sinks.hook.concurrency:"),
            "\(refused.output)")
    }

    /// A write queued by `transaction add` while the relay runs goes out at once: the command signals the relay
    /// (SIGUSR1), which drains the outbox then, not at its next look a minute later.
    @Test func configCheckNamesFileLineAndKeyAndRunRefusesTheSameFile() async throws {
        let dir = FileManager.default.temporaryDirectory.appending(path: "relay-check-\(UUID())")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let file = dir.appending(path: "relay.yaml").path
        try "server:\n  url: http://127.0.0.1:1\n  tokn: abc\n".write(toFile: file, atomically: true, encoding: .utf8)
        let check = try RelayProcess(env: [:], arguments: ["config", "check", "--config", file])
        #expect(await check.wait() == 78)
        #expect(
            check.output.contains("\(file):3:3: server.tokn: is not a known key. Fix: did you mean server.token?"),
            "\(check.output)")
        let run = try RelayProcess(env: [:], arguments: ["run", "--config", file])
        #expect(await run.wait() == 78)
        #expect(run.output.contains("server.tokn: is not a known key"))
        let demo = PythonPeer.root.appending(path: "config/demo.yaml").path
        let good = try RelayProcess(env: [:], arguments: ["config", "check", "--config", demo, "--json"])
        #expect(await good.wait() == 0)
        #expect(good.output.contains(#""ok":true"#), "\(good.output)")
    }

    /// A typo in a variable's name was ignored (`Configuration OK`) where the same typo in the file is an error: now
    /// both are, with did-you-mean, and a sink URL gets the same scheme fix as server.url (its path kept back).
    @Test func aMisspeltVariableIsAnErrorAsAMisspeltKeyIs() async throws {
        let dir = FileManager.default.temporaryDirectory.appending(path: "env-typo-\(UUID())")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let file = dir.appending(path: "relay.yaml").path
        try
            "server:\n  url: http://127.0.0.1:1\n  token: abc\nsinks:\n  hook:\n    type: webhook\n    url: htp//hooks.example.org/secret-path\n"
            .write(toFile: file, atomically: true, encoding: .utf8)
        let check = try RelayProcess(
            env: ["ALLOWANCE_RELAY_SERVER_URLL": "http://x", "ALLOWANCE_RELAY_LOG_LEVL": "debug"],
            arguments: ["config", "check", "--config", file])
        #expect(await check.wait() == 78)
        #expect(
            check.output.contains(
                "environment: ALLOWANCE_RELAY_LOG_LEVL: names no setting. Fix: did you mean ALLOWANCE_RELAY_LOG_LEVEL?"),
            "\(check.output)")
        #expect(
            check.output.contains(
                "ALLOWANCE_RELAY_SERVER_URLL: names no setting. Fix: did you mean ALLOWANCE_RELAY_SERVER_URL?"))
        #expect(
            check.output.contains("did you mean https://hooks.example.org/...?")
                || check.output.contains("did you mean http://hooks.example.org/...?"), "\(check.output)")
        #expect(!check.output.contains("secret-path"), "the sink URL's path is not repeated")
    }

    /// `server.insecure_tls` turns off every certificate check: `config check` says so (in text and JSON), not only
    /// the WebSocket's connect log.
    @Test func configCheckWarnsOfInsecureTLS() async throws {
        let demo = PythonPeer.root.appending(path: "config/demo.yaml").path
        let env = ["ALLOWANCE_RELAY_SERVER_URL": "https://127.0.0.1:1", "ALLOWANCE_RELAY_SERVER_TOKEN": "t"]
        let plain = try RelayProcess(env: env, arguments: ["config", "check", "--config", demo])
        #expect(await plain.wait() == 0)
        #expect(!plain.output.contains("insecure_tls"), "\(plain.output)")
        let insecure = try RelayProcess(
            env: env.merging(["ALLOWANCE_RELAY_SERVER_INSECURE_TLS": "true"]) { $1 },
            arguments: ["config", "check", "--config", demo])
        #expect(await insecure.wait() == 0)
        #expect(
            insecure.output.contains("warning: server.insecure_tls is on: no TLS certificate or host name is checked"),
            "\(insecure.output)")
        let json = try RelayProcess(
            env: env.merging(["ALLOWANCE_RELAY_SERVER_INSECURE_TLS": "true"]) { $1 },
            arguments: ["config", "check", "--config", demo, "--json"])
        #expect(await json.wait() == 0)
        #expect(json.output.contains("server.insecure_tls is on"), "\(json.output)")
    }

    @Test func invalidConfigurationExits78() async throws {
        let relay = try RelayProcess(env: ["ALLOWANCE_RELAY_SERVER_URL": "not a url"])
        #expect(await relay.wait() == 78)
        #expect(
            relay.output.contains(
                "configuration error:\n  environment: ALLOWANCE_RELAY_SERVER_URL: 'not a url' is not an http:// or https:// URL"
            ))
    }

    /// A file with several mistakes, in both the settings and the relay's sections, gets all of them at once, each
    /// with file:line:column, key, what is wrong and the fix ("did you mean" where a known word is close); YAML
    /// syntax errors come in the same form; `--json` gives the same as a list of objects; the exit code is 78.
    @Test func configCheckReportsEveryMistakeAtOnceLikeACompiler() async throws {
        let dir = FileManager.default.temporaryDirectory.appending(path: "relay-check-\(UUID())")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let file = dir.appending(path: "relay.yaml").path
        try """
        server:
          url: 127.0.0.1:33525
        relay:
          currency: [USD]
        log:
          levl: debug
        sinks:
          chat:
            type: slak
            url: https://x.example
        rule:
          - event: transaction.created

        """.write(toFile: file, atomically: true, encoding: .utf8)
        let check = try RelayProcess(env: [:], arguments: ["config", "check", "--config", file])
        #expect(await check.wait() == 78)
        #expect(
            check.output.contains(
                """
                allowance-relay: 5 configuration errors:
                  \(file):2:8: server.url: '127.0.0.1:33525' is not an http:// or https:// URL with a host. Fix: did you mean http://127.0.0.1:33525?
                  \(file):4:3: relay.currency: must be a single value, not a list or a mapping. Fix: write one value after the colon, e.g. relay.currency: USD.
                  \(file):6:3: log.levl: is not a known key. Fix: did you mean log.level?
                  \(file):9:11: sinks.chat.type: type 'slak' is not a sink type. Fix: did you mean slack?
                  \(file):11:1: rule: is not a known section. Fix: did you mean rules?
                """), "\(check.output)")
        let json = try RelayProcess(env: [:], arguments: ["config", "check", "--config", file, "--json"])
        #expect(await json.wait() == 78)
        let problems = try JSONValue(parsing: Array(json.output.utf8))["problems"]?.arrayValue ?? []
        #expect(
            problems.map { $0["key"]?.stringValue ?? "" } == [
                "server.url", "relay.currency", "log.levl", "sinks.chat.type", "rule",
            ])
        #expect(problems.map { $0["line"]?.intValue ?? 0 } == [2, 4, 6, 9, 11])
        #expect(problems[2]["fix"]?.stringValue == "did you mean log.level?" && problems[2]["column"]?.intValue == 3)

        try "server:\n  url: http://x\n   bad: 1\n".write(toFile: file, atomically: true, encoding: .utf8)
        let syntax = try RelayProcess(env: [:], arguments: ["config", "check", "--config", file])
        #expect(await syntax.wait() == 78)
        #expect(
            syntax.output.contains(
                "\(file):3:7: YAML syntax: mapping values are not allowed in this context. Fix: check the indentation (spaces, not tabs) and the quoting on this line and the one above."
            ), "\(syntax.output)")
    }
}
