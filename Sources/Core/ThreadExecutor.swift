@_spi(ExperimentalScheduling) import _Concurrency

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// One thread that runs the jobs of the tasks that prefer it (`withTaskExecutorPreference`, SE-0417), and of the
/// actors without an executor of their own that those tasks call.
///
/// For work that hands itself along: the relay's store writer, then its sink workers, then their outcomes. On the
/// global pool each hand-over (a continuation resumed, an actor entered) woke another pool thread; here it is a job
/// queued on the same thread, and only a hand-over from another thread (the connection's, the alarm clock's) wakes
/// it. A continuation resumes its task on the task's preferred executor, so the work stays here.
///
/// A thread may also drive an event loop of its own (`ThreadLoop`: libcurl's, for the HTTP client): it then waits in
/// that loop's poll rather than on a condition, and a request handed to the loop by a job on the thread, and its
/// answer, cost no other thread a wake-up.
///
/// The executor must outlive the tasks that prefer it: `shutdown()` once they have ended. A job that still comes
/// after it goes to the global pool rather than nowhere. `shutdown()` returns once the thread has wholly ended (its
/// thread-local destructors and its share of the allocator's caches included), so that the end of a thread never
/// overlaps the teardown of what its jobs used: the daemon's shutdown returns to an exit with nothing still ending.
public final class ThreadExecutor: TaskExecutor, @unchecked Sendable {
    // @unchecked: every field but `name` is behind `mutex`, a pthread mutex (with `condition`).

    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let condition = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
    private var jobs: [UnownedJob] = []
    /// The thread waits on `condition`: the next job signals it (and only then: a busy thread needs no system call).
    private var sleeping = false
    private var stopping = false
    /// The thread has ended: jobs go to the global pool.
    private var ended = false
    /// Joined by the first `shutdown()`, the one that sets `stopping` (detached instead when that is called on the
    /// thread itself).
    private var thread = pthread_t()
    public let name: String
    /// What keeps the deadlines of the sleeps of the tasks that prefer the thread.
    let alarms: any Alarms
    /// The thread's own event loop, if it drives one; let go of once the thread has ended.
    private var loop: (any ThreadLoop)?

    /// Starts the thread, named `name` (as `top -H` shows it; 15 characters are kept). `loop`: an event loop the
    /// thread drives between its jobs and waits in when it has none.
    public init(name: String, alarms: any Alarms = AlarmClock.shared, loop: (any ThreadLoop)? = nil) {
        self.name = name
        self.alarms = alarms
        self.loop = loop
        pthread_mutex_init(mutex, nil)
        pthread_cond_init(condition, nil)
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        thread = OwnThread.startJoinable(named: name) { self.serve() }  // it holds the executor until it ends
    }

    deinit {
        pthread_cond_destroy(condition)
        pthread_mutex_destroy(mutex)
        condition.deallocate()
        mutex.deallocate()
    }

    public func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        pthread_mutex_lock(mutex)
        guard !ended else {
            pthread_mutex_unlock(mutex)
            return globalConcurrentExecutor.enqueue(ExecutorJob(job))
        }
        jobs.append(job)
        // Only a sleeping thread needs a call: a busy one (or this one, queuing its own job) looks at `jobs` next.
        let wake = sleeping
        sleeping = false
        let loop = wake ? self.loop : nil
        if wake && loop == nil { pthread_cond_signal(condition) }
        pthread_mutex_unlock(mutex)
        loop?.wake()
    }

    /// The caller runs on this executor's thread.
    public var isCurrent: Bool { pthread_equal(thread, pthread_self()) != 0 }

    public func asUnownedTaskExecutor() -> UnownedTaskExecutor {
        UnownedTaskExecutor(ordinary: self)
    }

    /// The thread ends once the jobs queued have run; this waits for that end, unless called from a job on the
    /// thread itself.
    public func shutdown() {
        pthread_mutex_lock(mutex)
        let first = !stopping
        stopping = true
        let wake = sleeping
        sleeping = false
        let loop = wake ? self.loop : nil
        if wake && loop == nil { pthread_cond_signal(condition) }
        let thread = self.thread
        pthread_mutex_unlock(mutex)
        loop?.wake()
        guard first else { return }
        if pthread_equal(thread, pthread_self()) != 0 {
            pthread_detach(thread)
        } else {
            pthread_join(thread, nil)
        }
    }

    private func serve() {
        let executor = asUnownedTaskExecutor()
        var batch: [UnownedJob] = []
        pthread_mutex_lock(mutex)
        let loop = self.loop
        while true {
            if jobs.isEmpty {
                if stopping { break }
                sleeping = true
                guard let loop else {
                    pthread_cond_wait(condition, mutex)
                    continue
                }
                pthread_mutex_unlock(mutex)
                // A job queued between the unlock and the wait wakes the loop (`enqueue`): the wait returns at once.
                loop.wait()
                pthread_mutex_lock(mutex)
                sleeping = false  // before the turn: the jobs it queues here need no wake-up
                pthread_mutex_unlock(mutex)
                loop.turn()  // what the wait found ready
                pthread_mutex_lock(mutex)
                continue
            }
            swap(&batch, &jobs)
            pthread_mutex_unlock(mutex)
            for job in batch { job.runSynchronously(on: executor) }
            batch.removeAll(keepingCapacity: true)
            loop?.turn()  // what the jobs handed the loop starts now, and a busy thread still serves the loop
            pthread_mutex_lock(mutex)
        }
        ended = true
        self.loop = nil
        pthread_mutex_unlock(mutex)
        loop?.finish()
    }
}

/// An event loop that a `ThreadExecutor`'s thread drives: `turn` and `wait` run on that thread only, `wake` anywhere.
public protocol ThreadLoop: AnyObject, Sendable {
    /// Does what is ready (sockets, timers, requests handed over) without waiting.
    func turn()
    /// Waits until something is ready or `wake()` is called; a wake that came before the wait is not lost.
    func wait()
    /// Ends the current or the next `wait()`.
    func wake()
    /// The thread is ending, its jobs all run: ends what the loop still holds.
    func finish()
}

/// A sleep in a task that prefers the thread is kept by the alarm clock and resumes here directly, not through the
/// default executor first.
@_spi(Scheduling) extension ThreadExecutor: SchedulingExecutor {
    public func enqueue<C: Clock>(
        _ job: consuming ExecutorJob, after delay: C.Duration, tolerance: C.Duration?, clock: C
    ) {
        alarms.wake(UnownedJob(job), after: delay, tolerance: tolerance, clock: clock)
    }
}
