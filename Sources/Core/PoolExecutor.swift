@_spi(ExperimentalCustomExecutors) @_spi(ExperimentalScheduling) import _Concurrency

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The process's default executor in place of libdispatch's global pool: the relay's tasks that prefer no thread of
/// their own run here, and every `Task.sleep` of theirs waits on the process's alarm clock.
///
/// Why: on Linux the first worker thread of libdispatch's pool starts its pool monitor, a one-second timer on the
/// manager thread that runs for the rest of the process whether any work waits or not (BENCHMARKS.md, session 35:
/// 3,600 of the idle relay's 6,100 wake-ups an hour). Here a thread without work waits on a condition variable and
/// wakes for nothing: `keep` threads wait for good, the ones started beyond them (when jobs waited `patience` with every
/// thread busy, as libdispatch's monitor adds one for a blocked worker) end after `linger` without work.
///
/// Installed by the executable before its first task (`DefaultExecutor.install`); a library never installs it. A pool
/// lives as long as the process: its kept threads hold it.
final class PoolExecutor: TaskExecutor, SchedulingExecutor, @unchecked Sendable {
    // @unchecked: every var is behind `mutex`, a pthread mutex (with `condition`).

    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let condition = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
    /// Jobs waiting, oldest first from `head` (taken jobs are dropped in bulk, not one `removeFirst` each).
    private var jobs: [UnownedJob] = []
    private var head = 0
    private var threads = 0
    /// Threads waiting for a job that no enqueue has claimed yet.
    private var idle = 0
    /// Wake-ups handed out by `enqueue` and not yet taken by a waiting thread.
    private var claimed = 0
    /// A `check` is due: every thread was busy when a job came.
    private var watching = false
    private let name: String
    private let keep: Int
    private let most: Int
    private let linger: Duration
    private let alarms: any Alarms

    /// `keep` threads wait for work for good once started; up to `most` run at once; a thread beyond `keep` ends
    /// after `linger` without work. Threads start at the first job that finds none waiting.
    init(
        name: String = "pool", keep: Int = max(2, Int(sysconf(Int32(_SC_NPROCESSORS_ONLN)))), most: Int = 64,
        linger: Duration = .seconds(10),
        alarms: any Alarms = AlarmClock.shared
    ) {
        (self.name, self.keep, self.most, self.linger, self.alarms) = (name, keep, max(keep, most), linger, alarms)
        pthread_mutex_init(mutex, nil)
        AlarmClock.initMonotonic(condition)
    }

    /// Makes a pool the process's default executor (and keeps libdispatch's main queue as the main executor).
    /// Must come before the process's first task: the executable's `main` calls it first.
    static func install() {
        _createExecutors(factory: Factory.self)
    }

    private struct Factory: ExecutorFactory {
        static let pool = PoolExecutor()
        static var mainExecutor: any MainExecutor { PlatformExecutorFactory.mainExecutor }
        static var defaultExecutor: any TaskExecutor { pool }
    }

    /// How many threads the pool has now (for tests and status).
    var threadCount: Int {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return threads
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        pthread_mutex_lock(mutex)
        jobs.append(job)
        var start = false
        var watch = false
        if idle > 0 {
            idle -= 1
            claimed += 1
            pthread_cond_signal(condition)
        } else if threads < keep {
            threads += 1
            start = true
        } else if !watching, threads < most {
            watching = true  // every thread is busy: if it stays so, one more (see `check`)
            watch = true
        }
        pthread_mutex_unlock(mutex)
        if start { OwnThread.startDetached(named: name) { self.serve() } }  // the thread holds the pool until it ends
        if watch { alarms.set(after: Self.patience) { self.check() } }
    }

    /// How long jobs may wait with every thread busy before the pool adds one: long enough that a burst of short
    /// jobs is run by the threads there are, short enough that a job stuck behind blocked threads is not held up.
    static let patience = Duration.milliseconds(20)

    /// Every thread was busy `patience` ago: if jobs still wait and none is free, one more thread starts, and the
    /// check comes again. Only while the pool is backed up: an idle pool sets no alarm.
    private func check() {
        pthread_mutex_lock(mutex)
        let backedUp = head < jobs.count && idle == 0
        let start = backedUp && threads < most
        if start { threads += 1 }
        watching = start
        pthread_mutex_unlock(mutex)
        if start {
            OwnThread.startDetached(named: name) { self.serve() }
            alarms.set(after: Self.patience) { self.check() }
        }
    }

    func enqueue<C: Clock>(
        _ job: consuming ExecutorJob, after delay: C.Duration, tolerance: C.Duration?, clock: C
    ) {
        alarms.wake(UnownedJob(job), after: delay, tolerance: tolerance, clock: clock)
    }

    func asUnownedTaskExecutor() -> UnownedTaskExecutor {
        UnownedTaskExecutor(ordinary: self)
    }

    private func serve() {
        pthread_mutex_lock(mutex)
        while true {
            if head < jobs.count {
                let job = jobs[head]
                head += 1
                if head == jobs.count || head > 1024 {
                    jobs.removeFirst(head)
                    head = 0
                }
                pthread_mutex_unlock(mutex)
                job.runSynchronously(on: asUnownedTaskExecutor())
                pthread_mutex_lock(mutex)
                continue
            }
            guard waitForWork() else {
                threads -= 1
                pthread_mutex_unlock(mutex)
                return
            }
        }
    }

    /// Waits (the mutex held) until an enqueue claims this thread. False: a thread beyond `keep` waited `linger`
    /// without a claim, and ends (a kept one waits on without a deadline).
    private func waitForWork() -> Bool {
        idle += 1
        var deadline = AlarmClock.monotonicDeadline(in: linger)
        while true {
            let result =
                threads > keep
                ? pthread_cond_timedwait(condition, mutex, &deadline) : pthread_cond_wait(condition, mutex)
            if claimed > 0 {
                claimed -= 1
                return true
            }
            if result == ETIMEDOUT, threads > keep {
                idle -= 1
                return false
            }
        }
    }
}

/// The process's default executor: `PoolExecutor`, for the executable to install before its first task.
public enum DefaultExecutor {
    /// Tasks without a thread of their own run on a pool of the relay's, and sleep on its alarm clock, instead of
    /// libdispatch's pool (see `PoolExecutor`). Call first thing in `main`, before any task exists.
    public static func install() { PoolExecutor.install() }
}

extension Alarms {
    /// Runs `job` where the alarm rings once `delay` of `clock` has passed: what an executor's `Task.sleep` needs
    /// (`SchedulingExecutor`). The standard clocks count in `Duration`, kept here; another clock's time base is left
    /// to the platform's executor.
    ///
    /// The job is not the sleeping task but the sleep's own wake-up task (the standard library's `Task.sleep` makes
    /// one per sleep, and is the only caller): it belongs to no executor and only resumes the sleeper, which then
    /// goes to its own executor. Run on the executor that was asked, it first hops to the default pool, whose thread
    /// then hands the sleeper back: three threads woken where one is enough (strace of the idle relay: the loop,
    /// a pool thread, the loop again, for each keep-alive ping). So it runs here, as the default executor's.
    public func wake<C: Clock>(_ job: UnownedJob, after delay: C.Duration, tolerance: C.Duration?, clock: C) {
        guard let wait = delay as? Duration else {
            let platform = PlatformExecutorFactory.defaultExecutor as? any SchedulingExecutor
            platform?.enqueue(ExecutorJob(job), after: delay, tolerance: tolerance, clock: clock)
            return
        }
        set(after: wait) { job.runSynchronously(on: Task.defaultExecutor.asUnownedTaskExecutor()) }
    }
}
