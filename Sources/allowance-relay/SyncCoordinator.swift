import AllowanceAPI
import Foundation
import Logging
import Store

/// Keeps the cache whole: stores each hub event, and runs one catch-up at a time whenever the link was
/// (re)established or an event shows the cache missed something. Requests during a catch-up coalesce.
actor SyncCoordinator {
    private let store: Store
    private let catchUp: CatchUp
    private let logger: Logger
    private var running = false
    private var again = false

    init(store: Store, api: APIClient, logger: Logger) {
        self.store = store
        self.catchUp = CatchUp(store: store, api: api, logger: logger)
        self.logger = logger
    }

    func handle(_ event: HubEvent) {
        do {
            switch try store.apply(event) {
            case .stored(gap: nil): break
            case .stored(gap: let child?):
                logger.notice("the cache missed something for child \(child.uuidString.lowercased()); catching up")
                requestCatchUp()
            case .duplicate:
                logger.debug("already stored: \(event.summary)")
            case .needsCatchUp(let reason):
                logger.info("catching up: \(reason)")
                requestCatchUp()
            }
        } catch {
            // Not stored: the next catch-up fetches it from the server again.
            logger.error("could not store an event: \(error.message)")
            requestCatchUp()
        }
    }

    func requestCatchUp() {
        if running {
            again = true
            return
        }
        running = true
        Task { await self.catchUpLoop() }
    }

    private func catchUpLoop() async {
        var attempt = 0
        repeat {
            again = false
            do {
                _ = try await catchUp.run()
                attempt = 0
            } catch {
                attempt += 1
                let delay = min(60, 1 << min(attempt, 6))
                logger.warning("catch-up failed (retrying in \(delay) s): \(error)")
                try? await Task.sleep(for: .seconds(delay))
                again = true
            }
        } while again
        running = false
    }
}
