#!/usr/bin/env python3
"""Before and after, side by side: bench.py's whole-relay throughput part alone (100,000 hub events, 20 and then 1
per frame, stored with their rules and delivery rows) for each folder of release binaries, alternating, ROUNDS
times, each beside the C floor that writes the relay's rows (`Benchmarks/floor/store_floor.c`); prints events/s and
CPU seconds per run. With `client`, the SignalR client alone instead (allowance-bench-client, JSON), beside the C
floor on libwebsockets in the same round. A folder holds
allowance-relay, allowance-hub-sim and allowance-bench-client (copy the relay of each build beside the same simulator).

    .venv/bin/python Benchmarks/relay_ab.py BEFORE_DIR,AFTER_DIR [ROUNDS] [client]
"""
import signal, sys, types
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import bench  # noqa: E402

folders = sys.argv[1].split(",")
rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
client = len(sys.argv) > 3 and sys.argv[3] == "client"
ours, floor = "allowance-relay SignalR client", "floor (raw libwebsockets, C)"
store_floor = "floor: the relay's rows (C: libwebsockets, SQLite)"
results = {f: {20: [], 1: []} for f in folders + [floor if client else store_floor]}
for _ in range(rounds):
    for folder in folders:
        run = bench.Bench(types.SimpleNamespace(quick=False, bin=folder, relay_env=[]))
        if client:
            run.floor = run.build_floor("lws_floor", ["libwebsockets"])
            everyone = run.clients
            run.clients = lambda sim: {k: v for k, v in everyone(sim).items() if k in (ours, floor)}
        else:
            run.store_floor = run.build_floor("store_floor", ["libwebsockets", "sqlite3", "libcurl"])
            run.clients = lambda sim: {}  # the relay, and the store floor after it
        for batch in (20, 1):
            sim = bench.Sim(run)
            rows = run.throughput_at(sim, batch, relay=not client)
            sim.proc.stop(signal.SIGKILL)
            for name, row in rows.items():
                key = name if name in (floor, store_floor) else folder
                results[key][batch].append((row["events_per_s"], row["cpu_s"]))
print("| binaries | per frame | events/s / CPU s, each round |")
print("|---|---:|---|")
for folder in results:
    for batch in (20, 1):
        print(f"| {folder} | {batch} | " + "; ".join(f"{e:,.0f} / {c:.3f}" for e, c in results[folder][batch]) + " |")
