import AllowanceAPI
import Core
import Foundation
import Logging
import StoreContract
import Synchronization

/// When each child's wish list is read again, as a value without I/O (`WishListRefresh` performs it).
///
/// The hub says nothing when a wish list changes, so the list is read over REST: after each catch-up, when the
/// child's balance moves (a purchase is a debit), and every `every` after the first catch-up (so a replica that
/// stands by, which never catches up, never reads them). One child's list is read at most once
/// per `spacing`, so a burst of a thousand transactions costs a request per child every few seconds, not a thousand: a list is at
/// most `spacing` behind a balance change, and at most `every` behind an edit that moved no balance.
struct WishListSchedule {
    let spacing: Duration
    let every: Duration
    /// Children waiting to be read, from when.
    private(set) var due: [UUID: ContinuousClock.Instant] = [:]
    /// When each child's list was last read.
    private var read: [UUID: ContinuousClock.Instant] = [:]
    private var lastRound: ContinuousClock.Instant?

    init(spacing: Duration = .seconds(5), every: Duration = .seconds(1800)) {
        self.spacing = spacing
        self.every = every
    }

    /// The child's list is to be read: now, or once `spacing` has passed since the last read. Returns whether that
    /// is news (not already due as soon): a burst asks thousands of times and wakes the reader once.
    @discardableResult
    mutating func ask(_ child: UUID, at now: ContinuousClock.Instant) -> Bool {
        let when = read[child].map { max(now, $0 + spacing) } ?? now
        if let already = due[child], already <= when { return false }
        due[child] = when
        return true
    }

    /// A catch-up completed: every child of `known` is read (each within `spacing` of its last read), and the
    /// rounds every `every` count from now.
    mutating func caughtUp(known: [UUID], at now: ContinuousClock.Instant) {
        lastRound = now
        for child in known { ask(child, at: now) }
    }

    /// Whether the round of every child is due: the reader then asks the cache for its children (`caughtUp`). Asked
    /// before each look, so that the children are read only for a round, not at every wake.
    func roundDue(at now: ContinuousClock.Instant) -> Bool {
        lastRound.map { now >= $0 + every } ?? false
    }

    /// What to read now, and when to look next (nil: only when asked).
    mutating func next(at now: ContinuousClock.Instant) -> (read: [UUID], wake: ContinuousClock.Instant?) {
        let ready = due.filter { $0.value <= now }.keys.sorted { $0.uuidString < $1.uuidString }
        for child in ready {
            due[child] = nil
            read[child] = now
        }
        let wake = ([lastRound.map { $0 + every }] + due.values.map(Optional.some)).compactMap { $0 }.min()
        return (ready, wake)
    }
}

/// Reads the children's wish lists as `WishListSchedule` says and stores them (`GoalStore.storeWishList`, which plans
/// `goal.purchased` and `goal.reached`). A server without the wish list (404) is asked again only at the next round.
public final class WishListRefresh: Sendable {
    private let store: any SyncStore
    private let api: APIClient
    private let logger: Logger
    private let schedule: Mutex<WishListSchedule>
    private let wakeup = Wakeup()
    private let missing = Mutex(false)
    private let stored = Mutex<(@Sendable () -> Void)?>(nil)

    /// `action` runs after each round of reads that stored a list (Home Assistant's goal sensors follow the lists).
    public func onStored(_ action: @escaping @Sendable () -> Void) {
        stored.withLock { $0 = action }
    }

    init(store: any SyncStore, api: APIClient, spacing: Duration, every: Duration, logger: Logger) {
        self.store = store
        self.api = api
        self.logger = logger
        self.schedule = Mutex(WishListSchedule(spacing: spacing, every: every))
    }

    /// The children's balances moved: their lists are read within `spacing`.
    func balancesMoved(_ children: Set<UUID>) {
        guard !children.isEmpty, !missing.withLock({ $0 }) else { return }
        let now = ContinuousClock.now
        let news = schedule.withLock { s in children.reduce(false) { s.ask($1, at: now) || $0 } }
        if news { wakeup.signal() }
    }

    /// A catch-up completed: every child's list is read (each within `spacing` of its last read).
    func caughtUp() {
        guard let children = try? store.children() else { return }
        let now = ContinuousClock.now
        schedule.withLock { $0.caughtUp(known: children.map(\.id), at: now) }
        wakeup.signal()
    }

    /// Reads the lists as they fall due, until cancelled.
    public func run() async {
        while !Task.isCancelled {
            let now = ContinuousClock.now
            if schedule.withLock({ $0.roundDue(at: now) }) {
                // An unreadable cache starts the round with no child: the next round is an `every` away, not now.
                let known = ((try? store.children()) ?? []).map(\.id)
                schedule.withLock { $0.caughtUp(known: known, at: now) }
            }
            let (due, wake) = schedule.withLock { $0.next(at: now) }
            if !due.isEmpty { missing.withLock { $0 = false } }
            var any = false
            for child in due where !Task.isCancelled { any = await refresh(child) || any }
            if any { stored.withLock { $0 }?() }
            await wakeup.wait(upTo: wake.map { max(.milliseconds(1), $0 - .now) } ?? .seconds(3600))
        }
    }

    /// Whether the list was read and stored.
    private func refresh(_ child: UUID) async -> Bool {
        do {
            let (items, unreadable) = try await api.wishList(child: child)
            if !unreadable.isEmpty {
                logger.warning(
                    "wish list of child \(child.lowercased): \(unreadable.count) item(s) could not be read and are left out: \(unreadable.prefix(3).joined(separator: "; "))"
                )
            }
            let planned = try store.storeWishList(child: child, items: items, at: Date())
            logger.debug("wish list of child \(child.lowercased): \(items.count) item(s), \(planned) alert(s)")
            return true
        } catch let error as APIError where error.status == 404 {
            // The server has no wish lists (an older backend) or no longer the child: asked again next round.
            if !missing.withLock({ $0 }) {
                logger.notice(
                    "the server has no wish list for child \(child.lowercased) (404): goals are not followed until it has"
                )
            }
            missing.withLock { $0 = true }
            return false
        } catch {
            // The server away is the catch-up's to say; a list it refuses otherwise is worth a warning.
            let away = (error as? APIError)?.kind.isRetryable ?? false
            logger.log(
                level: away ? .debug : .warning,
                "wish list of child \(child.lowercased) could not be read: \(error); read again later")
            let now = ContinuousClock.now
            _ = schedule.withLock { $0.ask(child, at: now) }  // read again after the spacing; news or not
            return false
        }
    }
}
