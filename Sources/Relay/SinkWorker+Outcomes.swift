import Core
import StoreContract

/// The committer: each worker's outcomes, written in batches as the sends report them.
extension SinkWorker {
    /// Writes the outcomes that have come in, all at once, until the worker ends and nothing is under way.
    func commitOutcomes(_ sends: SendsInProgress, wake: Wakeup) async {
        // Outcomes a failed write left (a full disk, a locked file): kept and written again after a pause. Their
        // rows stay taken meanwhile, so those alerts are not sent again, and no new send starts past `concurrency`.
        var unwritten: [SendsInProgress.Finished] = []
        var failures = 0
        while true {
            let (batch, done, gather) = sends.takeFinished(gatheringFor: .milliseconds(2))
            if let gather, unwritten.isEmpty {
                await wake.wait(upTo: gather, evenIfCancelled: true)
                continue
            }
            let outcomes = unwritten + batch
            if !outcomes.isEmpty {
                do {
                    let results = outcomes.map { ($0.id, $0.result) }
                    if !done && failures == 0 && sends.dispatcher == .drained {
                        // Nothing else to send: the slots these rows hold cost nothing while their outcomes wait
                        // for the next event's commit (one commit a transaction instead of two).
                        try await ledger.record(results, withNextWriteWithin: Self.carryWindow)
                    } else {
                        try ledger.record(results)
                    }
                    if failures > 0 {
                        logger.notice("sink \(name): outcomes are recorded again (\(outcomes.count) had waited)")
                    }
                    (unwritten, failures) = ([], 0)
                    sends.release(outcomes.map(\.id))
                    // Room for more sends, and the released rows' retries. A dispatcher idle with nothing left due
                    // needs no wake-up for sends that went through: it would only ask the ledger to find nothing.
                    let allDone = outcomes.allSatisfy { if case .done = $0.result { true } else { false } }
                    if !allDone { handOver.forget() }  // a retry's row, due later: the next look asks the ledger
                    if !(allDone && sends.dispatcher == .drained) { wakeup.signal() }
                } catch {
                    unwritten = outcomes
                    failures += 1
                    if done {
                        // Stopping: the rows stay pending and go again (same ids) at the next start.
                        logger.error(
                            "sink \(name): \(outcomes.count) outcome(s) could not be recorded before the stop: \(error)"
                        )
                        return
                    }
                    if failures == 1 {
                        logger.error(
                            "sink \(name): could not record \(outcomes.count) outcome(s): \(error). Kept, and written again shortly; those alerts are not sent again meanwhile"
                        )
                    }
                    await wake.wait(upTo: Self.recordRetry.delay(retry: failures), evenIfCancelled: true)
                    continue
                }
            }
            if done { return }
            // Past the stop's deadline too: the sends being cut short still report, and their outcomes are written.
            // No timeout: every send's end and the worker's close signal `wake`, and an idle sink's committer has no
            // reason to wake (it did once a minute, an alarm and a thread switch each time).
            if batch.isEmpty { await wake.wait(upTo: nil, evenIfCancelled: true) }
        }
    }

    /// How long outcomes wait for an event's commit to carry them before they get one of their own: longer than the
    /// gap between events in a steady stream (50 ms at 20 a second), short beside a person reading `deliveries`.
    static let carryWindow = Duration.milliseconds(200)

    /// Pauses between attempts at writing outcomes the ledger refused.
    static let recordRetry = Backoff(initial: .milliseconds(500), maximum: .seconds(30))
}
