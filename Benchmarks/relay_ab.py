#!/usr/bin/env python3
"""Before and after, side by side: bench.py's whole-relay throughput part alone (100,000 hub events, 20 and then 1
per frame, stored with their rules and delivery rows) for each folder of release binaries, alternating, ROUNDS
times; prints events/s and the relay's CPU seconds per run. A folder holds allowance-relay, allowance-hub-sim and
allowance-bench-client (copy the relay of each build beside the same simulator).

    .venv/bin/python Benchmarks/relay_ab.py BEFORE_DIR,AFTER_DIR [ROUNDS]
"""
import signal, sys, types
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import bench  # noqa: E402

folders = sys.argv[1].split(",")
rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
results = {f: {20: [], 1: []} for f in folders}
for _ in range(rounds):
    for folder in folders:
        run = bench.Bench(types.SimpleNamespace(quick=False, bin=folder, relay_env=[]))
        run.clients = lambda sim: {}  # the relay only
        for batch in (20, 1):
            sim = bench.Sim(run)
            row = next(iter(run.throughput_at(sim, batch).values()))
            sim.proc.stop(signal.SIGKILL)
            results[folder][batch].append((row["events_per_s"], row["cpu_s"]))
print("| binaries | per frame | events/s / CPU s, each round |")
print("|---|---:|---|")
for folder in folders:
    for batch in (20, 1):
        print(f"| {folder} | {batch} | " + "; ".join(f"{e:,.0f} / {c:.2f}" for e, c in results[folder][batch]) + " |")
