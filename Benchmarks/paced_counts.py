#!/usr/bin/env python3
"""Calls counted per transaction at a paced rate with one live webhook sink: the relay of BIN_DIR, connected and
settled, takes COUNT transactions at RATE a second from the simulator, each sent to a webhook receiver, and `perf stat`
counts on every thread of it the calls into the libraries' entry points named by uprobes: allocations (malloc,
swift_allocObject), releases (swift_release), SQLite statements compiled (sqlite3_prepare_v3) and run (sqlite3_step).
The soak's load at RATE 20, the latency part's at 1,000. Counts, not time: a change too small for the host's spread in
CPU seconds still shows. The probes slow the relay: its CPU here means nothing. Needs perf and the probes, made once
as root (those of `blast_counts.py`, and):

    perf probe -x /usr/lib/x86_64-linux-gnu/libsqlite3.so.0 sqlite3_prepare_v3

    .venv/bin/python Benchmarks/paced_counts.py BIN_DIR [COUNT] [RATE]
"""
import signal, sys, types
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import bench  # noqa: E402

EVENTS = ["probe_libc:malloc", "probe_libswiftCore:swift_allocObject", "probe_libswiftCore:swift_release",
          "probe_libsqlite3:sqlite3_prepare_v3", "probe_libsqlite3:sqlite3_step"]
count = int(sys.argv[2]) if len(sys.argv) > 2 else 300
rate = int(sys.argv[3]) if len(sys.argv) > 3 else 20
run = bench.Bench(types.SimpleNamespace(quick=False, bin=sys.argv[1], relay_env=[]))
sim = bench.Sim(run)
try:
    with run.relay_to_receiver(sim, "paced-counts") as (relay, db, receiver):
        err = bench.perf_during_paced(["perf", "stat", "-x", ",", "-e", ",".join(EVENTS)], relay.p.pid, sim, receiver,
                                      count, rate)
finally:
    sim.proc.stop(signal.SIGKILL)
for name, calls in bench.perf_stat_counts(err).items():
    print(f"{name:40} {calls / count:8.2f} per transaction")
