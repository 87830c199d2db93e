#!/usr/bin/env python3
"""The system calls of a blast: the relay of BIN_DIR (its sink on a closed port, as in bench.py's throughput part)
takes 100,000 events at 1 a frame, then the C floor on the relay's rows (`Benchmarks/floor/store_floor.c`) the same
on a copy of the relay's database; for each, its CPU seconds and, counted with `perf stat` on every thread, its
`fdatasync` (one a commit), `pwrite64`, `pread64` and `fcntl` calls. Whether a blast's CPU follows how many commits
its bursts made. Needs perf.

    .venv/bin/python Benchmarks/blast_syscalls.py BIN_DIR
"""
import signal, subprocess, sys, time, types
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import bench  # noqa: E402

CALLS = ["fdatasync", "pwrite64", "pread64", "fcntl"]
run = bench.Bench(types.SimpleNamespace(quick=False, bin=sys.argv[1], relay_env=[]))
run.store_floor = run.build_floor("store_floor", ["libwebsockets", "sqlite3", "libcurl"])
sim = bench.Sim(run)


def measure(proc, db, who):
    events = ",".join(f"syscalls:sys_enter_{c}" for c in CALLS)
    perf = subprocess.Popen(["perf", "stat", "-x", ",", "-e", events, "-p", str(proc.p.pid)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    time.sleep(0.5)
    row = run.blast_stored(sim, 1, proc, db, who)
    perf.send_signal(signal.SIGINT)
    _, err = perf.communicate()
    counts = {name.removeprefix("syscalls:sys_enter_"): int(n) for name, n in bench.perf_stat_counts(err).items()}
    print(f"{who}: {row['cpu_s']:.3f} CPU s, " + ", ".join(f"{counts.get(c, 0)} {c}" for c in CALLS))


try:
    relay, db = run.start_relay(sim, "blast-syscalls", "http://127.0.0.1:9/closed")
    try:
        bench.wait_until(lambda: run.ready(db), 60, "the relay to connect and catch up")
        template = run.copy_db(db, "blast-syscalls-floor.sqlite")
        measure(relay, db, "the relay")
    finally:
        relay.stop()
    floor = bench.Proc("store-floor", [str(run.store_floor), "127.0.0.1", str(sim.port),
                                        f"/hubs/family?access_token={bench.TOKEN}", str(template)], workdir=run.work)
    try:
        floor.wait_line(lambda line: line == "connected", 30)
        measure(floor, template, "the floor on the relay's rows (C)")
    finally:
        floor.stop()
finally:
    sim.proc.stop(signal.SIGKILL)
