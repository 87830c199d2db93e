// swift-tools-version:6.2
import PackageDescription

// The layers, bottom to top: a module declares only modules of the layers below its own. LayerTests reads these
// `// layer:` lines (the one list): a module missing from them, or a dependency that points sideways or up, fails it.
// layer: CLibWebSockets CCurl CLibCrypto CSystemd CMosquitto CPostgres CCairo CLinux
// layer: Core
// layer: WebSocketTransport HTTPTransport MQTTTransport PostgresTransport Charts
// layer: SignalRProtocol Telemetry
// layer: SignalRClient HubSimulator
// layer: AllowanceAPI
// layer: Alerts
// layer: StoreContract Config
// layer: Store SharedStore
// layer: Sync Relay
// layer: RelayDaemon
// layer: allowance-relay allowance-hub-sim
//
// The C libraries come from Debian; Core holds JSON values, back-off and redaction for logs. The transports: the
// WebSocket (libwebsockets), the one HTTP client (libcurl: negotiate, REST, webhooks, SMTP), MQTT (libmosquitto) and
// PostgreSQL (libpq). SignalRProtocol is the pure hub codec, SignalRClient the connection; Telemetry the OTLP tracer.
// AllowanceAPI is the backend's REST API and models, Alerts the alert events, StoreContract the storage contract
// that both stores implement (Store: SQLite; SharedStore: PostgreSQL, for replicas; neither imports the other),
// Config the settings. Sync (catch-up, outbox) and Relay (rules, templates, sinks) run on either store; the domain
// never reaches the connection (LayerTests). RelayDaemon holds the Services; allowance-relay only wires them.
// HubSimulator is a stand-in backend for tests, the demo and benchmarks on a different WebSocket stack
// (Hummingbird) with its own hub protocol, handshake, negotiate and REST bodies on Foundation's JSONDecoder and its
// own writer, and its own MessagePack: it shares no module with the client, so a bug in the client's codec cannot be
// mirrored.
let package = Package(
    name: "allowance-relay",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "allowance-relay", targets: ["allowance-relay"]),
        .executable(name: "allowance-hub-sim", targets: ["allowance-hub-sim"]),
        .library(name: "SignalRClient", targets: ["SignalRClient"]),
        .executable(name: "signalr-hub-watcher", targets: ["signalr-hub-watcher"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/groue/GRDB.swift.git", from: "7.10.0"),
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1"),
        .package(url: "https://github.com/hummingbird-project/hummingbird-websocket.git", from: "2.8.1"),
        .package(url: "https://github.com/jpsim/Yams.git", from: "6.2.2"),
        .package(url: "https://github.com/apple/swift-http-types.git", from: "1.8.0"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-distributed-tracing.git", from: "1.7.3"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        // Already there through Hummingbird; named because the simulator and its tests use NIOCore's types.
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.3"),
        // `make docs` (part of `make test`): every library's documentation (SignalRClient's DocC catalog too),
        // warnings as errors.
        .package(url: "https://github.com/swiftlang/swift-docc-plugin.git", from: "1.5.0"),
    ],
    targets: [
        // libwebsockets, from Debian's libwebsockets-dev.
        .systemLibrary(
            name: "CLibWebSockets",
            pkgConfig: "libwebsockets",
            providers: [.apt(["libwebsockets-dev"])]
        ),
        // libcurl, from Debian's libcurl4-openssl-dev.
        .systemLibrary(name: "CCurl", pkgConfig: "libcurl", providers: [.apt(["libcurl4-openssl-dev"])]),
        // OpenSSL's libcrypto, from Debian's libssl-dev (already loaded for libcurl's TLS): HMAC for webhook signatures.
        .systemLibrary(name: "CLibCrypto", pkgConfig: "libcrypto", providers: [.apt(["libssl-dev"])]),
        // libmosquitto, from Debian's libmosquitto-dev: the MQTT sink's client.
        .systemLibrary(name: "CMosquitto", pkgConfig: "libmosquitto", providers: [.apt(["libmosquitto-dev"])]),
        // libpq, from Debian's libpq-dev: the PostgreSQL client that relays sharing one database use.
        .systemLibrary(name: "CPostgres", pkgConfig: "libpq", providers: [.apt(["libpq-dev"])]),
        // Linux calls Swift's Glibc module leaves out (glibc's own headers; no package): timerfd for the AlarmClock,
        // pidfd_open for FileLease.
        .systemLibrary(name: "CLinux"),
        // cairo, from Debian's libcairo2-dev: the summaries' charts, drawn to PNG.
        .systemLibrary(name: "CCairo", pkgConfig: "cairo", providers: [.apt(["libcairo2-dev"])]),
        // A balance over time as a PNG picture (cairo). Knows nothing of the relay (as MQTTTransport).
        .target(name: "Charts", dependencies: ["CCairo"]),
        // A PostgreSQL session on libpq: statements with parameters, LISTEN/NOTIFY, the session's advisory locks.
        // Knows nothing of the relay (as MQTTTransport).
        .target(name: "PostgresTransport", dependencies: ["CPostgres", "Core"]),
        // An MQTT connection whose QoS 1 publish returns once the broker has the message. Knows nothing of the relay.
        .target(name: "MQTTTransport", dependencies: ["CMosquitto"]),
        // The one HTTP client (libcurl's multi interface on one thread): negotiate, the REST API, every webhook.
        .target(name: "HTTPTransport", dependencies: ["CCurl", "Core"]),
        // One lws context on one service thread; knows nothing of SignalR.
        .target(
            name: "WebSocketTransport",
            dependencies: ["CLibWebSockets", "Core", .product(name: "Logging", package: "swift-log")]
        ),
        // What every layer shares, so that none imports another only for a helper: the JSON value type with its
        // reader and writer, back-off, redaction of URLs and header values for logs.
        .target(name: "Core", dependencies: ["CLinux"]),
        // SignalR JSON hub protocol: 0x1E framing, handshake, messages 1-9, negotiate body; typed hub arguments, the
        // decoder of a hub's events and the bounded buffer that hands them to their consumer. Pure, no I/O.
        .target(name: "SignalRProtocol", dependencies: ["Core"]),
        // Generic SignalR client: negotiate, handshake, handlers, invoke/stream, keep-alive, reconnect.
        // No allowance words here: it is a library others could use.
        .target(
            name: "SignalRClient",
            dependencies: [
                "Core", "SignalRProtocol", "WebSocketTransport", "HTTPTransport",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "Instrumentation", package: "swift-distributed-tracing"),
            ]
        ),
        // The Allowance Tracker domain: models, money, hub event decoding, the REST client and its tokens.
        .target(
            name: "AllowanceAPI",
            dependencies: ["Core", "SignalRProtocol", "HTTPTransport"]
        ),
        // What the relay says and decides: alert events and their kinds, planned deliveries, the planner's interface.
        // Below the store, which plans deliveries inside the transaction that stores their event.
        .target(name: "Alerts", dependencies: ["AllowanceAPI", "Core"]),
        // The configuration, in a room of its own: the YAML file and the environment read once; the schema (each
        // key's type, default and allowed values, once); the settings read from it (RelaySettings: server, store,
        // log, status; AlertSettings: the relay's sinks, rules and templates); every mistake with its file, line,
        // key and fix.
        .target(
            name: "Config",
            dependencies: [
                "AllowanceAPI", "Alerts", "HTTPTransport", "SignalRProtocol", "PostgresTransport",
                .product(name: "Yams", package: "Yams"),
            ]
        ),
        // The storage contract: the row types and the protocols the relay, the sync engine and the CLI use, which
        // both stores implement (the SQLite file and the PostgreSQL database replicas share). No database here.
        .target(
            name: "StoreContract",
            dependencies: [
                "Alerts", "AllowanceAPI", "Core", .product(name: "Tracing", package: "swift-distributed-tracing"),
            ]),
        // The local SQLite cache: schema and migrations, hub events applied atomically, the outbox.
        .target(
            name: "Store",
            dependencies: [
                "AllowanceAPI", "Alerts", "CLinux", "Core", "StoreContract",
                .product(name: "GRDB", package: "GRDB.swift"), .product(name: "GRDBSQLite", package: "GRDB.swift"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // What relays sharing one PostgreSQL hold in common: the hub link's lease, the replicas' registry, queues
        // of jobs claimed with SKIP LOCKED and woken by NOTIFY, the schema's migrations.
        .target(
            name: "SharedStore", dependencies: ["PostgresTransport", "Core", "Alerts", "AllowanceAPI", "StoreContract"]),
        // The sync engine: catch-up over REST, the outbox drain, the sync state machine.
        .target(
            name: "Sync",
            dependencies: [
                "AllowanceAPI", "Alerts", "Core", "StoreContract", "SignalRProtocol",
                .product(name: "Logging", package: "swift-log"), .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
            ]
        ),
        // sd-bus from Debian's libsystemd-dev, for desktop notifications.
        .systemLibrary(name: "CSystemd", pkgConfig: "libsystemd", providers: [.apt(["libsystemd-dev"])]),
        // The relay: rules -> templates -> sinks (desktop, webhooks), with workers over the durable delivery ledger.
        .target(
            name: "Relay",
            dependencies: [
                "AllowanceAPI", "Alerts", "Config", "StoreContract", "CSystemd", "CLibCrypto", "Core", "HTTPTransport",
                "MQTTTransport", "Charts",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
            ]
        ),
        // The relay's tracer and its OTLP/HTTP exporter (protobuf written here, sent by the one HTTP client).
        .target(
            name: "Telemetry",
            dependencies: [
                "HTTPTransport", "Core", .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        // The daemon's long-lived parts as swift-service-lifecycle Services (hub link, store writer, relay workers,
        // outbox poller, reloader, status endpoint) and the configuration loading they share with the CLI.
        .target(
            name: "RelayDaemon",
            dependencies: [
                "AllowanceAPI", "Config", "Core", "SignalRClient", "HTTPTransport", "Store", "StoreContract", "Sync",
                "Relay", "Telemetry", "CSystemd", "SharedStore", "Alerts", "Charts",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
            ]
        ),
        // The CLI: parses arguments, builds the configuration, wires the daemon; the commands on the cache.
        .executableTarget(
            name: "allowance-relay",
            dependencies: [
                "AllowanceAPI", "Config", "Core", "SignalRClient", "HTTPTransport", "Store", "StoreContract", "Relay",
                "RelayDaemon", "SharedStore",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ],
            plugins: ["BuildStamp"]
        ),
        // `--version` names the commit: a prebuild step writes it (Plugins/BuildStamp).
        .plugin(name: "BuildStamp", capability: .buildTool()),
        // The stand-in backend (REST + hub) on Hummingbird: a different WebSocket stack and codec from the client's.
        .target(
            name: "HubSimulator",
            dependencies: [
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdWebSocket", package: "hummingbird-websocket"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
            ]
        ),
        .executableTarget(
            name: "allowance-hub-sim",
            dependencies: [
                "HubSimulator",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // The SignalRClient library's example (its DocC catalog shows it): a hub watcher in 40 lines.
        .executableTarget(name: "signalr-hub-watcher", dependencies: ["SignalRClient"], path: "Examples/HubWatcher"),
        // `make bench`: our SignalR client alone, decoding and counting (Benchmarks/README.md).
        .executableTarget(
            name: "allowance-bench-client",
            dependencies: ["AllowanceAPI", "SignalRClient", .product(name: "Logging", package: "swift-log")],
            path: "Benchmarks/Client"
        ),
        // Shared by the test targets: the in-process simulator, and the Python peers from Tests/Interop.
        .target(
            name: "TestSupport",
            dependencies: [
                "Core", "HubSimulator", "HTTPTransport",
                .product(name: "Logging", package: "swift-log"), .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOCore", package: "swift-nio"),
            ],
            path: "Tests/TestSupport"
        ),
        // One test target per library, bottom to top; EndToEndTests runs the programs and checks the layer rule.
        .testTarget(name: "CoreTests", dependencies: ["Core", "TestSupport"]),
        .testTarget(name: "HTTPTransportTests", dependencies: ["HTTPTransport", "TestSupport"]),
        .testTarget(name: "MQTTTransportTests", dependencies: ["MQTTTransport", "TestSupport"]),
        .testTarget(name: "ChartsTests", dependencies: ["Charts"]),
        .testTarget(name: "PostgresTransportTests", dependencies: ["Core", "PostgresTransport", "TestSupport"]),
        .testTarget(
            name: "SharedStoreTests",
            dependencies: [
                "SharedStore", "PostgresTransport", "Store", "StoreContract", "Alerts", "AllowanceAPI", "Core",
                "TestSupport",
            ]),
        // The storage contract's suites, each run on both backends (SQLite and a real PostgreSQL server).
        .testTarget(
            name: "StoreContractTests",
            dependencies: [
                "StoreContract", "Store", "SharedStore", "Sync", "PostgresTransport", "Alerts", "AllowanceAPI",
                "TestSupport", .product(name: "Logging", package: "swift-log"),
            ]),
        .testTarget(
            name: "WebSocketTransportTests",
            dependencies: [
                "WebSocketTransport", "TestSupport", .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdWebSocket", package: "hummingbird-websocket"),
                .product(name: "Logging", package: "swift-log"), .product(name: "NIOCore", package: "swift-nio"),
            ]
        ),
        .testTarget(name: "SignalRProtocolTests", dependencies: ["SignalRProtocol", "TestSupport"]),
        .testTarget(
            name: "SignalRClientTests",
            dependencies: [
                "SignalRClient", "SignalRProtocol", "WebSocketTransport", "HubSimulator", "TestSupport",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "InMemoryTracing", package: "swift-distributed-tracing"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "Instrumentation", package: "swift-distributed-tracing"),
                .product(name: "HummingbirdWebSocket", package: "hummingbird-websocket"),
                .product(name: "Logging", package: "swift-log"), .product(name: "NIOCore", package: "swift-nio"),
            ]
        ),
        .testTarget(name: "HubSimulatorTests", dependencies: ["HubSimulator", "TestSupport"]),
        .testTarget(
            name: "AllowanceAPITests",
            dependencies: ["AllowanceAPI", "SignalRProtocol", "TestSupport"]),
        .testTarget(name: "AlertsTests", dependencies: ["Alerts", "AllowanceAPI"]),
        .testTarget(name: "ConfigTests", dependencies: ["Config", "AllowanceAPI", "TestSupport"]),
        .testTarget(
            name: "StoreTests",
            dependencies: [
                "Store", "StoreContract", "Alerts", "AllowanceAPI", "SignalRProtocol", "Core", "TestSupport",
                .product(name: "GRDB", package: "GRDB.swift"),
                // SQLite's C API itself: a commit hook that refuses (CarriedOutcomeTests).
                .product(name: "GRDBSQLite", package: "GRDB.swift"),
            ]),
        .testTarget(
            name: "SyncTests",
            dependencies: [
                "Sync", "Alerts", "Store", "StoreContract", "AllowanceAPI", "SignalRProtocol", "TestSupport",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .testTarget(
            name: "RelayTests",
            dependencies: [
                "Relay", "Alerts", "Config", "Store", "StoreContract", "AllowanceAPI", "Core", "SignalRProtocol",
                "HTTPTransport", "TestSupport", "SharedStore", "PostgresTransport",
                .product(name: "GRDB", package: "GRDB.swift"), .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .testTarget(
            name: "RelayDaemonTests",
            dependencies: ["AllowanceAPI", "Config", "Core", "RelayDaemon", "Store", "StoreContract"]),
        .testTarget(
            name: "TelemetryTests",
            dependencies: [
                "Telemetry", "Core", "HTTPTransport", "TestSupport",
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // The programs as a user runs them (the binaries it starts are built with the package), the daemon
        // in-process, the configuration across modules, and the layer rule.
        .testTarget(
            name: "EndToEndTests",
            dependencies: [
                "AllowanceAPI", "Alerts", "Config", "Core", "SignalRClient", "SignalRProtocol", "HTTPTransport",
                "Store", "StoreContract", "Relay", "RelayDaemon", "HubSimulator",
                "Sync", "TestSupport", .product(name: "Logging", package: "swift-log"),
                // What these tests start: built with them, found next to the test bundle (relayBinaryPath).
                "allowance-relay", "allowance-hub-sim",
            ]),
    ],
    swiftLanguageModes: [.v6]
)

// `make fuzz` only (ALLOWANCE_FUZZ=1, its own build folder): the config parser under libFuzzer
// (-sanitize=fuzzer,address); its entry point hands over to libFuzzer's driver (Fuzz/harnesses/config).
if Context.environment["ALLOWANCE_FUZZ"] != nil {
    package.targets.append(
        .executableTarget(
            name: "fuzz-config", dependencies: ["Relay"], path: "Fuzz/harnesses/config",
            swiftSettings: [.unsafeFlags(["-parse-as-library"])],
            linkerSettings: [.unsafeFlags(["-use-ld=lld"])]))  // gold fails with an internal error on this link
    package.products.append(.executable(name: "fuzz-config", targets: ["fuzz-config"]))
}
