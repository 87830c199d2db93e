#!/usr/bin/env python3
"""The system calls of the soak's load, counted: the relay of BIN_DIR, connected and settled, takes COUNT
transactions at 20 a second, each sent to a webhook receiver; then the two C floors of the soak take the same load
(`Benchmarks/floor/soak_floor.c`, the least durable work, and `store_floor.c` on a copy of the relay's database, the
relay's rows). `perf trace -s` counts each program's calls on every thread; the table gives them per transaction,
the relay's by thread too. Whether the kernel is asked for more by the relay than by the floor on its own rows, and
which thread asks. Counts, not time (tracing slows each program). Needs perf.

    .venv/bin/python Benchmarks/soak_syscalls.py BIN_DIR [COUNT]
"""
import re, signal, sys, types
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import bench  # noqa: E402

count = int(sys.argv[2]) if len(sys.argv) > 2 else 400
rate = 20
run = bench.Bench(types.SimpleNamespace(quick=False, bin=sys.argv[1], relay_env=[]))
floors = {name: run.build_floor(name, ["libwebsockets", "sqlite3", "libcurl"]) for name in ("soak_floor", "store_floor")}
sim = bench.Sim(run)


def traced(proc, receiver):
    """The calls `proc` makes while it takes the load: {thread name: Counter(syscall: calls)}."""
    err = bench.perf_during_paced(["perf", "trace", "-s"], proc.p.pid, sim, receiver, count, rate)
    threads, current = {}, None
    for line in err.splitlines():
        if m := re.match(r"\s*(.+?) \((\d+)\), \d+ events", line):
            # One name for a thread whose name carries a number (signalr-NNNN), so that runs compare.
            current = threads.setdefault(re.sub(r"-\d+$", "", m.group(1)), Counter())
        elif current is not None and (m := re.match(r"\s+([a-z_0-9]+)\s+(\d+)\s+\d+\s", line)):
            current[m.group(1)] += int(m.group(2))
    return threads


rows = {}
try:
    with run.relay_to_receiver(sim, "soak-syscalls") as (relay, db, receiver):
        template = run.copy_db(db, "soak-syscalls-store-floor.sqlite")
        rows["the relay"] = traced(relay, receiver)
    for name, db in (("soak_floor", run.work / "soak-syscalls-floor.sqlite"), ("store_floor", template)):
        receiver = bench.Receiver()
        proc = run.connected_floor(floors[name], sim, db, receiver)
        try:
            rows[name] = traced(proc, receiver)
        finally:
            proc.stop()
            receiver.close()
finally:
    sim.proc.stop(signal.SIGKILL)

total = {who: sum(threads.values(), Counter()) for who, threads in rows.items()}
busy = [t for t, c in sorted(rows["the relay"].items(), key=lambda x: -sum(x[1].values())) if sum(c.values()) >= count / 10]
names = sorted(set().union(*total.values()), key=lambda s: -total["the relay"][s])
per = lambda n: f"{n / count:.2f}"
print(f"System calls per transaction, {count} transactions at {rate} a second\n")
print("| call | the relay, all threads | " + " | ".join(f"relay: {t}" for t in busy)
      + " | minimal floor (C) | floor on the relay's rows (C) |")
print("|---|" + "---:|" * (3 + len(busy)))
for s in names:
    if max(total[w][s] for w in total) >= count / 20:
        print(f"| {s} | {per(total['the relay'][s])} | " + " | ".join(per(rows['the relay'][t][s]) for t in busy)
              + f" | {per(total['soak_floor'][s])} | {per(total['store_floor'][s])} |")
print(f"| in all | {per(sum(total['the relay'].values()))} | "
      + " | ".join(per(sum(rows['the relay'][t].values())) for t in busy)
      + f" | {per(sum(total['soak_floor'].values()))} | {per(sum(total['store_floor'].values()))} |")
