import AllowanceAPI
import Config
import Core
import Foundation
import HTTPTransport
import Logging
import Relay
import ServiceLifecycle
import SignalRClient
import StoreContract
import Sync
import Synchronization

/// The hub link and the store's writer: the connection, its events stored by the sync engine a burst per
/// transaction, a catch-up after each (re)connect. On a shared database only the holder of the link's lease runs
/// it (a standby waiting for it takes it at the holder's death, and catches up from the cursors it left); on
/// a file of its own, always.
struct LinkService: Service {
    let settings: RelaySettings
    let sync: SyncCoordinator
    let store: any SyncStore & ChildRoster
    let engine: RelayEngine
    let link: LinkMonitor
    let metrics: RelayMetrics
    let http: HTTPClient
    let tokens: (any TokenSource)?
    /// Where the writer runs: the workers' thread on a file, a thread of its own on a shared database.
    let executor: any TaskExecutor
    /// Where the connection's changes are followed: each records the link's state in the store (a blocking call).
    let syncThread: any TaskExecutor
    /// Nil: the link is this relay's alone.
    let lease: (any WatchedLease)?
    let holdsLink: LinkHeld
    let logger: Logger

    func run() async throws {
        guard let lease else { return try await session() }
        let (link, holdsLink, logger) = (link, holdsLink, logger)
        try await cancelWhenGracefulShutdown {
            try await holdingLease(lease) { held in
                holdsLink.set(held)
                link.set(
                    held ? .connecting : .standby,
                    detail: held ? "holds the hub link, connecting" : "another replica holds the hub link")
                logger.notice(held ? "this replica holds the hub link" : "this replica no longer holds the hub link")
            } work: {
                try await session()
            }
        }
    }

    /// One hub connection and its writer, until the connection ends, a graceful stop, or cancellation (the lease
    /// lost): what the connection delivered is stored before it returns.
    private func session() async throws {
        let connection = HubConnection(
            url: settings.hubURL, options: Daemon.hubOptions(settings, http: http, tokens: tokens),
            logger: Logger(label: "signalr"))
        // The one hand-off between the hub link and the store: bounded, so a slow disk holds the hub back by TCP.
        // A few commits' worth (the writer takes up to 1,000 events per commit): more only holds memory.
        let received = HubEventBuffer<HubEvent>(capacity: 4_000)
        await connection.on(
            HubEvent.decoder { [logger] problem in logger.error("could not read a hub event: \(problem)") },
            into: received)
        let events = await connection.events()
        let writer = Task { await withTaskExecutorPreference(executor) { await write(received) } }
        defer { received.finish() }
        do {
            try await withTaskCancellationHandler {
                try await withTaskExecutorPreference(syncThread) { try await follow(connection, events) }
            } onCancel: {
                Task { await connection.stop() }
            }
        } catch {
            received.finish()
            await writer.value
            throw error
        }
        // Stopped after the hub: what the connection delivered is stored before the end.
        received.finish()
        await writer.value
    }

    /// The connection's changes: to the sync engine, the relay, the status endpoint and systemd.
    private func follow(_ connection: HubConnection, _ events: AsyncStream<HubConnectionEvent>) async throws {
        let stopping = StopFlag()
        try await withGracefulShutdownHandler {
            do throws(HubConnectionError) {
                try await connection.start()
            } catch {
                if stopping.isSet || Task.isCancelled { return }
                throw DaemonError(
                    exitCode: error.kind == .unauthorized ? 77 : 1, message: "could not connect: \(error.message)")
            }
            for await event in events {
                switch event {
                case .connected(let id), .reconnected(let id):
                    // the client's line says how
                    logger.info("connected to the hub", metadata: ["connectionId": "\(id ?? "-")"])
                    if case .reconnected = event { metrics.reconnects.increment() }
                    link.set(
                        .connected, connectionId: id, transport: await connection.transport?.rawValue,
                        hubProtocol: connection.hubProtocol.rawValue, detail: "connected")
                    Systemd.status("connected to the hub")
                    // A new connection lost whatever was sent while there was none: fetch it.
                    engine.linkRestored()
                    await sync.linkRestored()
                case .reconnecting(let reason):
                    // Not logged here: the hub client's warning and the sync state's line already say it.
                    link.set(.reconnecting, detail: reason)
                    Systemd.status("reconnecting: \(reason)")
                    engine.linkLost(reason)
                    await sync.linkLost(reason)
                case .closed(let error):
                    if let error, !stopping.isSet, !Task.isCancelled {
                        throw DaemonError(
                            exitCode: error.kind == .unauthorized ? 77 : 1,
                            message: "the hub connection ended: \(error.message)")
                    }
                    return
                }
            }
        } onGracefulShutdown: {
            stopping.set()
            logger.info("closing the hub connection, then finishing the deliveries in flight")
            Systemd.stopping()
            Task { await connection.stop() }
        }
    }

    /// Stores the hub events the connection decoded, a burst per transaction, until the buffer is finished and empty.
    private func write(_ events: HubEventBuffer<HubEvent>) async {
        let (metrics, logger, store) = (metrics, logger, store)
        let json = settings.logFormat == .json
        // The children's names for the log lines, read again when an event names a child not seen yet.
        var names: [UUID: String] = [:]
        await sync.store(from: events) { batch in
            for event in batch {
                metrics.hubEvent(event)
                if json {
                    logger.info("hub event", metadata: ["event": .string(event.jsonText)])
                } else if logger.logLevel <= .info {
                    let child = event.childId
                    if let child, names[child] == nil, let children = try? store.children() {
                        names = Dictionary(children.map { ($0.id, $0.firstName) }, uniquingKeysWith: { a, _ in a })
                    }
                    logger.info("\(event.summary(childName: child.flatMap { names[$0] }))")
                }
            }
        } handled: { batch in
            // The commit's moment at microseconds on the wall clock, the hub's send clock on one machine:
            // the benchmark's hub-to-commit latency is read from this line.
            guard logger.logLevel <= .debug else { return }
            let ids = batch.compactMap { event -> String? in
                if case .transactionCreated(let t) = event { t.id.uuidString.lowercased() } else { nil }
            }
            logger.debug(
                "stored \(batch.count) hub event(s)",
                metadata: [
                    "transactions": .string(ids.joined(separator: ",")),
                    "unix_us": .stringConvertible(Int64((Date().timeIntervalSince1970 * 1e6).rounded())),
                ])
        }
    }
}

/// Whether this relay holds the hub link, for its heartbeat, which each change wakes (`changed`).
final class LinkHeld: Sendable {
    private let value = Atomic<Bool>(false)
    let changed: Wakeup?

    init(changed: Wakeup? = nil) {
        self.changed = changed
    }

    var isHeld: Bool { value.load(ordering: .relaxed) }

    func set(_ held: Bool) {
        if value.exchange(held, ordering: .relaxed) != held { changed?.signal() }
    }
}
