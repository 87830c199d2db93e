#!/usr/bin/env python3
"""What a commit's `fdatasync` costs when the log grows and when it is overwritten in place. A commit writes about
12 KiB to the write-ahead log and syncs it; while the log grows, each sync also writes the file's new size. COUNT
times, alternating: 12 KiB written at the end of a fresh file and synced, then the same into a file written with
zeros beforehand; back to back, or (`paced`) 20 a second as in the soak. Prints the system CPU per sync (this
process's, from getrusage) and the wall time per write and sync. Run it in the folder the benchmarks use (the same
file system as the relay's database).

    python3 Benchmarks/fsync_append.py [COUNT] [paced] [ROUNDS]
"""
import os, resource, sys, tempfile, time

count = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
paced = len(sys.argv) > 2 and sys.argv[2] == "paced"
rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 3
chunk = b"x" * 12288


def one(mode):
    fd, path = tempfile.mkstemp(prefix="fsync-append-", dir=".")
    try:
        if mode == "overwrite":
            os.write(fd, b"\0" * (count * len(chunk) + 65536))
            os.fsync(fd)
        time.sleep(0.2)
        r0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.monotonic()
        busy = 0.0
        for i in range(count):
            b = time.monotonic()
            os.pwrite(fd, chunk, i * len(chunk))
            os.fdatasync(fd)
            busy += time.monotonic() - b
            if paced:
                time.sleep(0.05)
        r1 = resource.getrusage(resource.RUSAGE_SELF)
        return 1000 * (r1.ru_stime - r0.ru_stime) / count, 1000 * busy / count
    finally:
        os.close(fd)
        os.unlink(path)


print(f"{count} writes of 12 KiB, each synced, {'20 a second' if paced else 'back to back'}")
print("| round | growing: system CPU ms a sync | wall ms | overwritten in place: system CPU ms a sync | wall ms |")
print("|---|---:|---:|---:|---:|")
for r in range(rounds):
    (ga, gw), (oa, ow) = one("append"), one("overwrite")
    print(f"| {r + 1} | {ga:.3f} | {gw:.3f} | {oa:.3f} | {ow:.3f} |")
