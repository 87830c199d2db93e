import AllowanceAPI
import Config
import Foundation
import TestSupport
import Testing

@Suite struct RelaySettingsTests {
    @Test func environmentAloneIsEnough() async throws {
        let s = try await RelaySettings.load(
            file: nil,
            environment: [
                "ALLOWANCE_RELAY_SERVER_URL": "http://127.0.0.1:5080/", "ALLOWANCE_RELAY_SERVER_TOKEN": "t0k",
                "ALLOWANCE_RELAY_STORE_PATH": "/tmp/x.sqlite",
            ])
        #expect(s.hubURL.absoluteString == "http://127.0.0.1:5080/hubs/family")
        #expect(try await s.tokenSource()?.token() == "t0k")
        #expect(s.storePath == "/tmp/x.sqlite")
        #expect("\(s.token!)" == "<redacted>", "a secret never prints itself")
    }

    @Test func environmentOverridesTheFile() async throws {
        let dir = FileManager.default.temporaryDirectory.appending(path: "relay-settings-\(UUID())")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let file = dir.appending(path: "relay.yaml")
        try "server:\n  url: http://file.example:1\n  hub_path: /hubs/other\nlog:\n  level: debug\n".write(
            to: file, atomically: true, encoding: .utf8)
        let s = try await RelaySettings.load(
            file: file.path, environment: ["ALLOWANCE_RELAY_SERVER_URL": "http://env.example:2"])
        #expect(s.hubURL.absoluteString == "http://env.example:2/hubs/other")
        #expect(s.logLevel == "debug")
    }

    /// Booleans written in the file count (they were ignored while `config check` said OK; the environment's
    /// worked), and a value that is not a boolean is an error naming the key.
    @Test func booleansInTheFileAreRead() async throws {
        let dir = FileManager.default.temporaryDirectory.appending(path: "relay-bools-\(UUID())")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let file = dir.appending(path: "relay.yaml")
        try
            "server:\n  url: https://h.example\n  skip_negotiation: true\n  insecure_tls: yes\n  access_token_in_query: on\n"
            .write(to: file, atomically: true, encoding: .utf8)
        let s = try await RelaySettings.load(file: file.path, environment: [:])
        #expect(s.skipNegotiation && s.insecureTLS && s.accessTokenInQuery)
        let env = try await RelaySettings.load(
            file: file.path, environment: ["ALLOWANCE_RELAY_SERVER_INSECURE_TLS": "false"])
        #expect(!env.insecureTLS, "the environment still wins")
        try "server:\n  url: https://h.example\n  insecure_tls: maybe\n".write(
            to: file, atomically: true, encoding: .utf8)
        await #expect { try await RelaySettings.load(file: file.path, environment: [:]) } throws: {
            ($0 as? ConfigErrors)?.description
                == "\(file.path):3:17: server.insecure_tls: 'maybe' is not true or false. Fix: write true or false."
        }
    }

    /// The keep-alive and the server timeout: the official clients' 15 s and 30 s unless set, durations from the file
    /// or the environment, and a timeout no longer than the keep-alive refused (the link would end between pings).
    @Test func keepAliveAndServerTimeout() async throws {
        let dir = FileManager.default.temporaryDirectory.appending(path: "relay-keepalive-\(UUID())")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let file = dir.appending(path: "relay.yaml")
        try "server:\n  url: https://h.example\n".write(to: file, atomically: true, encoding: .utf8)
        let plain = try await RelaySettings.load(file: file.path, environment: [:])
        #expect(plain.keepAliveInterval == 15 && plain.serverTimeout == 30)
        try "server:\n  url: https://h.example\n  keep_alive_interval: 5s\n  server_timeout: 2m\n".write(
            to: file, atomically: true, encoding: .utf8)
        let set = try await RelaySettings.load(file: file.path, environment: [:])
        #expect(set.keepAliveInterval == 5 && set.serverTimeout == 120)
        let env = try await RelaySettings.load(
            file: file.path, environment: ["ALLOWANCE_RELAY_SERVER_KEEP_ALIVE_INTERVAL": "1s"])
        #expect(env.keepAliveInterval == 1, "the environment wins")
        #expect(set.connectionFingerprint != env.connectionFingerprint, "a reload that changes it asks for a restart")
        try "server:\n  url: https://h.example\n  keep_alive_interval: often\n  server_timeout: 10s\n".write(
            to: file, atomically: true, encoding: .utf8)
        await #expect { try await RelaySettings.load(file: file.path, environment: [:]) } throws: {
            ($0 as? ConfigErrors)?.description
                == "\(file.path):3:24: server.keep_alive_interval: 'often' is not a duration. Fix: e.g. 90s, 15m or 1h."
        }
        try "server:\n  url: https://h.example\n  keep_alive_interval: 30s\n".write(
            to: file, atomically: true, encoding: .utf8)
        await #expect { try await RelaySettings.load(file: file.path, environment: [:]) } throws: {
            ($0 as? ConfigErrors)?.description.contains(
                "server.server_timeout: is not longer than server.keep_alive_interval") == true
        }
    }

    /// The hub protocol and the transports: a list in the file, `a,b` in the environment, each name checked.
    @Test func hubProtocolAndTransports() async throws {
        let dir = FileManager.default.temporaryDirectory.appending(path: "relay-transports-\(UUID())")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let file = dir.appending(path: "relay.yaml")
        let defaults = try await RelaySettings.load(
            file: nil, environment: ["ALLOWANCE_RELAY_SERVER_URL": "https://h.example"])
        #expect(defaults.hubProtocol == .json && defaults.transports == [.webSockets, .serverSentEvents, .longPolling])

        try "server:\n  url: https://h.example\n  hub_protocol: messagepack\n  transports: [long_polling, websockets]\n"
            .write(to: file, atomically: true, encoding: .utf8)
        let s = try await RelaySettings.load(file: file.path, environment: [:])
        #expect(s.hubProtocol == .messagepack && s.transports == [.longPolling, .webSockets])
        let block = try await RelaySettings.load(
            file: nil,
            environment: [
                "ALLOWANCE_RELAY_SERVER_URL": "https://h.example",
                "ALLOWANCE_RELAY_SERVER_TRANSPORTS": "server_sent_events",
            ])
        #expect(block.transports == [.serverSentEvents])

        try "server:\n  url: https://h.example\n  transports:\n    - websocket\n".write(
            to: file, atomically: true, encoding: .utf8)
        await #expect { try await RelaySettings.load(file: file.path, environment: [:]) } throws: {
            "\($0)".contains(
                "server.transports: 'websocket' is not one of websockets, server_sent_events, long_polling. Fix: did you mean websockets?"
            )
        }
        try "server:\n  url: https://h.example\n  hub_protocol: messagepack\n  transports: [server_sent_events]\n"
            .write(to: file, atomically: true, encoding: .utf8)
        await #expect { try await RelaySettings.load(file: file.path, environment: [:]) } throws: {
            "\($0)".contains("allows Server-Sent Events only, which cannot carry MessagePack")
        }
        try "server:\n  url: https://h.example\n  hub_protocol: msgpack\n".write(
            to: file, atomically: true, encoding: .utf8)
        await #expect { try await RelaySettings.load(file: file.path, environment: [:]) } throws: {
            "\($0)".contains("\(file.path):3:17: server.hub_protocol: 'msgpack' is not one of json, messagepack.")
        }
    }

    @Test func retentionAndOutboxLimitsComeFromTheFile() async throws {
        let dir = FileManager.default.temporaryDirectory.appending(path: "relay-local-\(UUID())")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let file = dir.appending(path: "relay.yaml")
        try "store:\n  path: /tmp/r.sqlite\n  keep_transactions_days: 30\noutbox:\n  limit: 5\n".write(
            to: file, atomically: true, encoding: .utf8)
        let local = try await RelaySettings.local(file: file.path, environment: [:])
        #expect(local.storePath == "/tmp/r.sqlite" && local.keepTransactionsDays == 30 && local.outboxLimit == 5)
        #expect(local.outboxMaxAttempts == 10 && local.outboxMaxAgeDays == 7, "defaults")
        await #expect {
            try await RelaySettings.local(file: nil, environment: ["ALLOWANCE_RELAY_OUTBOX_LIMIT": "lots"])
        } throws: {
            ($0 as? ConfigErrors)?.description
                == "environment: ALLOWANCE_RELAY_OUTBOX_LIMIT: 'lots' is not a whole number above 0. Fix: e.g. 100."
        }
    }

    @Test func tokenFileMustBePrivate() async throws {
        let dir = FileManager.default.temporaryDirectory.appending(path: "relay-token-\(UUID())")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let file = dir.appending(path: "token").path
        try "s3cret-value\n".write(toFile: file, atomically: true, encoding: .utf8)
        chmod(file, 0o644)
        let s = try await RelaySettings.load(
            file: nil,
            environment: [
                "ALLOWANCE_RELAY_SERVER_URL": "http://127.0.0.1:1", "ALLOWANCE_RELAY_SERVER_TOKEN_FILE": file,
            ])
        await #expect {
            try await s.tokenSource()?.token()
        } throws: { error in
            let message = (error as? APIError)?.message ?? ""
            return message.contains("chmod 600") && !message.contains("s3cret")
        }
        chmod(file, 0o600)
        #expect(try await s.tokenSource()?.token() == "s3cret-value")
    }

    /// A secret file is read with care: a FIFO would block the start for ever, a huge file would be read whole.
    @Test func aSecretFileThatIsNotAPrivateLineIsRefused() throws {
        let dir = FileManager.default.temporaryDirectory.appending(path: "relay-secret-\(UUID())")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let fifo = dir.appending(path: "fifo").path
        #expect(mkfifo(fifo, 0o600) == 0)
        #expect(throws: APIError.self) { try Secret.read(file: fifo, what: "token file") }
        let big = dir.appending(path: "big").path
        try Data(count: 1 << 20).write(to: URL(fileURLWithPath: big))
        chmod(big, 0o600)
        do {
            _ = try Secret.read(file: big, what: "token file")
            Issue.record("a 1 MB secret file was accepted")
        } catch {
            #expect(error.message.contains("1048576 bytes"), "\(error)")
        }
    }

    @Test(arguments: [
        (
            [String: String](),
            "configuration: server.url: is not set. Fix: set server.url in the config file or ALLOWANCE_RELAY_SERVER_URL (e.g. http://127.0.0.1:5000)."
        ),
        (
            ["ALLOWANCE_RELAY_SERVER_URL": "ftp://x"],
            "environment: ALLOWANCE_RELAY_SERVER_URL: 'ftp://x' is not an http:// or https:// URL with a host. Fix: e.g. https://allowance.example.org."
        ),
        (
            ["ALLOWANCE_RELAY_SERVER_URL": "http://x", "ALLOWANCE_RELAY_LOG_FORMAT": "jsn"],
            "environment: ALLOWANCE_RELAY_LOG_FORMAT: 'jsn' is not one of text, json. Fix: did you mean json?"
        ),
        (
            ["ALLOWANCE_RELAY_SERVER_URL": "http://x", "ALLOWANCE_RELAY_STORE_DURABILITY": "maybe"],
            "environment: ALLOWANCE_RELAY_STORE_DURABILITY: 'maybe' is not one of full, normal. Fix: use one of full, normal."
        ),
        (
            ["ALLOWANCE_RELAY_SERVER_URL": "http://x", "ALLOWANCE_RELAY_SERVER_EMAIL": "a@b"],
            "environment: ALLOWANCE_RELAY_SERVER_EMAIL: is set without a password. Fix: set server.password_file (mode 600) or ALLOWANCE_RELAY_SERVER_PASSWORD."
        ),
        (
            [
                "ALLOWANCE_RELAY_SERVER_URL": "http://x", "ALLOWANCE_RELAY_SERVER_EMAIL": "a@b",
                "ALLOWANCE_RELAY_SERVER_TOKEN": "t",
            ],
            "environment: ALLOWANCE_RELAY_SERVER_EMAIL: is set together with a token. Fix: keep one way to sign in: remove server.token* or server.email."
        ),
        (
            [
                "ALLOWANCE_RELAY_SERVER_URL": "ftp://parent:hunter2@allowance.example.org",
                "ALLOWANCE_RELAY_SERVER_TOKEN": "t",
            ],
            "environment: ALLOWANCE_RELAY_SERVER_URL: 'ftp://allowance.example.org' is not an http:// or https:// URL with a host. Fix: e.g. https://allowance.example.org."
        ),
    ])
    func badSettingsSayWhatToFix(_ env: [String: String], _ expected: String) async {
        do {
            _ = try await RelaySettings.load(file: nil, environment: env)
            Issue.record("accepted \(env)")
        } catch {
            #expect(error.all.first?.description == expected, "\(error)")
            #expect(!error.description.contains("hunter2"), "a password in the URL is never printed back")
        }
    }

    @Test func missingConfigFileIsNamed() async {
        do {
            _ = try await RelaySettings.load(file: "/nonexistent/relay.yaml", environment: [:])
            Issue.record("accepted a missing file")
        } catch {
            #expect(
                error.description == "/nonexistent/relay.yaml: cannot be read. Fix: check the path and its permissions."
            )
        }
    }
    /// `store.url` selects the shared PostgreSQL store; a URL holding a password is refused without repeating it,
    /// the password comes from a file (read afresh) or the environment.
    @Test func aSharedStoreURLIsCheckedAndItsPasswordNeverSitsInIt() async throws {
        let dir = FileManager.default.temporaryDirectory.appending(path: "relay-store-url-\(UUID())")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let passwordFile = dir.appending(path: "db-password").path
        try "s3cret-db\n".write(toFile: passwordFile, atomically: true, encoding: .utf8)
        chmod(passwordFile, 0o600)
        let base = ["ALLOWANCE_RELAY_SERVER_URL": "https://h.example"]
        let plain = try await RelaySettings.load(file: nil, environment: base)
        #expect(plain.local.sharedStore == nil, "SQLite stays the default")
        let shared = try await RelaySettings.load(
            file: nil,
            environment: base.merging([
                "ALLOWANCE_RELAY_STORE_URL": "postgres://relay@db.home.lan/allowance?sslmode=verify-full",
                "ALLOWANCE_RELAY_STORE_PASSWORD_FILE": passwordFile, "ALLOWANCE_RELAY_STORE_REPLICA_NAME": "relay-a",
            ]) { $1 })
        #expect(
            shared.local.sharedStore?.description == "postgres://relay@db.home.lan:5432/allowance?sslmode=verify-full")
        #expect(try shared.local.storePassword() == "s3cret-db")
        #expect(shared.local.replicaName == "relay-a")
        await #expect {
            try await RelaySettings.load(
                file: nil,
                environment: base.merging(["ALLOWANCE_RELAY_STORE_URL": "postgres://relay:hunter2@db/allowance"]) { $1 }
            )
        } throws: {
            let text = "\($0)"
            return text
                == "environment: ALLOWANCE_RELAY_STORE_URL: the URL holds a password. Fix: take it out and put it in store.password_file (a file only the relay's user can read) or ALLOWANCE_RELAY_STORE_PASSWORD."
                && !text.contains("hunter2")
        }
        await #expect {
            try await RelaySettings.load(
                file: nil, environment: base.merging(["ALLOWANCE_RELAY_STORE_URL": "mysql://relay@db/allowance"]) { $1 }
            )
        } throws: {
            "\($0)".hasPrefix(
                "environment: ALLOWANCE_RELAY_STORE_URL: the scheme is 'mysql', not postgres://. Fix: write it as postgres://"
            )
        }
    }
}
