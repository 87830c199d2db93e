#!/usr/bin/env python3
"""Before and after, side by side: the relay's CPU per transaction at a paced rate with one live webhook sink, for
each folder of release binaries, alternating, ROUNDS times: COUNT transactions at RATE a second (the latency part's
load at 1,000), each relay connected and settled first, its CPU read from the kernel before and after. Where the soak
(`soak_ab.py`, 20 a second) sees each transaction's code run cold, this sees the same code warm.

    .venv/bin/python Benchmarks/paced_ab.py BEFORE_DIR,AFTER_DIR [ROUNDS] [COUNT] [RATE]
"""
import signal, sys, time, types
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import bench  # noqa: E402

folders = sys.argv[1].split(",")
rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
count = int(sys.argv[3]) if len(sys.argv) > 3 else 10_000
rate = int(sys.argv[4]) if len(sys.argv) > 4 else 1000
rows = {f: [] for f in folders}
for r in range(rounds):
    for folder in folders:
        run = bench.Bench(types.SimpleNamespace(quick=False, bin=folder, relay_env=[]))
        sim = bench.Sim(run)
        try:
            with run.relay_to_receiver(sim, "paced-ab") as (relay, db, receiver):
                known = len(receiver.arrivals)
                before = relay.status()
                bench.call("POST", sim.url + f"/_sim/paced?count={count}&rate={rate}", timeout=count // rate + 120)
                bench.wait_until(lambda: len(receiver.arrivals) - known >= count, 120, "every webhook")
                time.sleep(0.3)
                after = relay.status()
        finally:
            sim.proc.stop(signal.SIGKILL)
        us = (after["cpu"] - before["cpu"]) * 1e6 / count
        rows[folder].append(us)
        print(f"round {r + 1}, {folder}: {us:.1f} us CPU per transaction", flush=True)
print()
print("| binaries | us CPU per transaction, each round | mean |")
print("|---|---|---:|")
for folder, figures in rows.items():
    print(f"| {folder} | {', '.join(f'{x:.1f}' for x in figures)} | {sum(figures) / len(figures):.1f} |")
