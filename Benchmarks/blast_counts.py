#!/usr/bin/env python3
"""Calls counted per hub event in a blast: the relay of BIN_DIR (its sink on a closed port, as in bench.py's
throughput part) takes 100,000 events at 1 a frame, and `perf stat` counts, on every thread of it, the calls into
the libraries' entry points named by uprobes: allocations (malloc, swift_allocObject), releases (swift_release) and
SQLite statements run (sqlite3_step). Counts, not time: the same build gives the same figures run after run, so a
change too small for the host's spread in CPU seconds still shows. The probes slow the relay tenfold: its CPU here
means nothing. Needs perf and the probes, made once as root:

    perf probe -x /usr/lib/x86_64-linux-gnu/libc.so.6 malloc
    perf probe -x /opt/swift/usr/lib/swift/linux/libswiftCore.so swift_allocObject
    perf probe -x /opt/swift/usr/lib/swift/linux/libswiftCore.so swift_release
    perf probe -x /usr/lib/x86_64-linux-gnu/libsqlite3.so.0 sqlite3_step

    .venv/bin/python Benchmarks/blast_counts.py BIN_DIR
"""
import signal, subprocess, sys, time, types
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import bench  # noqa: E402

EVENTS = ["probe_libc:malloc", "probe_libswiftCore:swift_allocObject", "probe_libswiftCore:swift_release",
          "probe_libsqlite3:sqlite3_step"]
run = bench.Bench(types.SimpleNamespace(quick=False, bin=sys.argv[1], relay_env=[]))
sim = bench.Sim(run)
try:
    relay, db = run.start_relay(sim, "blast-counts", "http://127.0.0.1:9/closed")
    try:
        bench.wait_until(lambda: run.ready(db), 60, "the relay to connect and catch up")
        time.sleep(3)
        sim.post("/_sim/blast/prepare?count=50000&batch=1")
        perf = subprocess.Popen(["perf", "stat", "-x", ",", "-e", ",".join(EVENTS), "-p", str(relay.p.pid)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        time.sleep(1)
        sim.post("/_sim/blast/go")
        bench.wait_until(lambda: (run.db_count(db, "SELECT COUNT(*) FROM delivery") or 0) >= 50000, 300,
                         "the relay to store every event", every=0.05)
        time.sleep(0.5)
        perf.send_signal(signal.SIGINT)
        _, err = perf.communicate()
    finally:
        relay.stop()
finally:
    sim.proc.stop(signal.SIGKILL)
for name, count in bench.perf_stat_counts(err).items():
    print(f"{name:40} {count / 100_000:8.2f} per event")
