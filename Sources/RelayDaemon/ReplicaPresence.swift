import Core
import Foundation
import Logging
import Relay
import ServiceLifecycle
import SharedStore
import StoreContract
import Sync

/// What a replica does beside the services every relay runs: its row in the registry (`status` lists the replicas),
/// a heartbeat that renews its claims every second while it holds some (so only a dead replica's are taken over,
/// after `SharedRelayStore.claimFor`, under the same ids) and writes whether it holds the link, and a session
/// listening for what other relays did, whose life says the replica is up (`ReplicaRegistry`). At rest neither
/// wakes. Started before the workers, so that it stops after them: their claims are renewed until their last send
/// ends.
struct ReplicaPresence: Service {
    let shared: SharedRelayStore
    let engine: RelayEngine
    let sync: SyncCoordinator
    /// Where a drain another relay's write asks for runs (off the pool: it blocks on the store).
    let syncThread: ThreadExecutor
    let holdsLink: LinkHeld
    let logger: Logger

    func run() async throws {
        do {
            try shared.register(host: ProcessInfo.processInfo.hostName)
        } catch {
            throw DaemonError(exitCode: 74, message: "\(error)")
        }
        logger.info("replica \(shared.replica) starting", metadata: ["store": "\(shared.location)"])
        await cancelWhenGracefulShutdown { [self] in
            await withDiscardingTaskGroup { group in
                group.addTask { await heartbeat() }
                group.addTask { await listen() }
            }
        }
    }

    /// Takes the replica's name (`SharedRelayStore.holdName`) before any other part of the relay starts: two relays
    /// under one name would each take the other's claims for their own and send them, so the second is refused
    /// (exit 78) before it sends or takes the link, even when both start at the same moment. The session of this
    /// name's earlier run may still hold the name for a few seconds (its machine vanished: the server's keep-alives
    /// end it within about 11 s), so it is waited for first. False when `stopAsked` said so first.
    func ownName(grace: Duration = .seconds(15), stopAsked: () -> Bool) async throws(DaemonError) -> Bool {
        let deadline = ContinuousClock.now + grace
        var said = false
        while !stopAsked() {
            let held: Bool
            do {
                held = try await offThread(named: "postgres-call") { [shared] () throws(StoreError) in
                    try shared.holdName()
                }
            } catch {
                throw DaemonError(exitCode: 74, message: "\(error)")
            }
            if held { return true }
            guard ContinuousClock.now < deadline else {
                throw DaemonError(
                    exitCode: 78,
                    message:
                        "another relay runs as replica '\(shared.replica)' on \(shared.location): replicas sharing a database need a name each. Fix: set store.replica_name (or ALLOWANCE_RELAY_STORE_REPLICA_NAME) to a name no other replica uses."
                )
            }
            if !said {
                logger.notice(
                    "replica \(shared.replica) is still up on the database: waiting up to \(grace) for it to end")
                said = true
            }
            try? await Task.sleep(for: .seconds(1))
        }
        return false
    }

    /// Its row (whether it holds the link) and its claims renewed: every second while it holds claims (or the
    /// database does not answer), then not until it claims again or the link changes hands.
    private func heartbeat() async {
        var failing = false
        while !Task.isCancelled {
            var held = 0
            do {
                held = try await offThread(named: "postgres-call") { [shared, holdsLink] () throws(StoreError) in
                    try shared.heartbeat(holdsLink: holdsLink.isHeld)
                    return try shared.renewClaims()
                }
                if failing { logger.notice("the shared database answers again") }
                failing = false
            } catch {
                if !failing { logger.error("heartbeat: \(error)") }
                failing = true
            }
            if held == 0 && !failing { await shared.heartbeatDue.wait(upTo: nil) }
            // A claim lasts `claimFor`: renewed a second after it was taken, and each second after.
            try? await Task.sleep(for: .seconds(1))
        }
    }

    /// Wakes the workers, the outbox and the rules at each notification, on a thread of its own (a session that
    /// waits for notifications does nothing else).
    private func listen() async {
        let (running, wake) = (StopFlag(), PollWake())
        let (shared, engine, sync, syncThread, logger) = (shared, engine, sync, syncThread, logger)
        await withTaskCancellationHandler {
            await offThread(named: "pg-listen") {
                shared.listen(while: { !running.isSet }, wake: wake) { channels in
                    if channels.contains(SharedRelayStore.channel) { engine.wakeWorkers() }
                    if channels.contains(SharedRelayStore.outboxChannel) {
                        Task(executorPreference: syncThread) { await sync.drainOutbox() }
                    }
                    if channels.contains(SharedRelayStore.mutesChannel) { engine.mutesChanged() }
                    if channels.contains(SharedRelayStore.retryChannel) { engine.retryAsked() }
                } failed: { error in
                    if let error {
                        logger.error("cannot listen for other relays' changes (polling meanwhile): \(error)")
                    } else {
                        logger.notice("listening for other relays' changes again")
                    }
                }
            }
        } onCancel: {
            running.set()
            wake.signal()
        }
    }

    /// After the group: what this replica claimed and did not finish goes back at once, and its row says it is down.
    func leave() {
        do {
            let released = try shared.releaseClaims()
            if released > 0 { logger.notice("gave back \(released) claimed delivery(ies) to the other replicas") }
            try shared.heartbeat(holdsLink: false)
        } catch {
            logger.warning("could not give back this replica's claims (they expire by themselves): \(error)")
        }
        shared.close()
    }
}
