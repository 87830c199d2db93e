// The idle floor of Swift concurrency on Linux: one empty task run on the global executor, then nothing.
//
//   swiftc -O idle_concurrency.swift && ./idle_concurrency     prints "connected" (for the harness), then sleeps
//
// The task starts a libdispatch worker thread, and the first worker starts libdispatch's pool monitor: a timer on
// the manager thread that fires every second for the rest of the process (`_dispatch_workq_init_once` in
// swift-corelibs-libdispatch's src/event/workqueue.c), whether or not any work is waiting. So any program whose
// tasks run on the default executor wakes about 3,600 times an hour at rest; this floor shows it.
import Glibc

Task {}
usleep(200_000)
print("connected")
fflush(stdout)
while true { sleep(3600) }
