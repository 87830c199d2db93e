#!/usr/bin/env python3
"""Before and after, side by side: bench.py's soak part alone (20 transactions a second, one webhook sink) for each
folder of release binaries, alternating, ROUNDS times, SECONDS each; prints the relay's CPU and context switches per
transaction, the switches by thread, and the two C floors on the same load in the same sitting
(`Benchmarks/floor/soak_floor.c`, and `store_floor.c` writing the relay's rows). A folder holds allowance-relay, allowance-hub-sim and allowance-bench-client.

    .venv/bin/python Benchmarks/soak_ab.py BEFORE_DIR,AFTER_DIR [ROUNDS] [SECONDS]
"""
import signal, sys, types
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import bench  # noqa: E402

folders = sys.argv[1].split(",")
rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 2
seconds = int(sys.argv[3]) if len(sys.argv) > 3 else 60
rows = {f: [] for f in folders}
for _ in range(rounds):
    for folder in folders:
        run = bench.Bench(types.SimpleNamespace(quick=False, bin=folder, relay_env=[], soak_seconds=seconds))
        run.soak_floor = run.build_floor("soak_floor", ["libwebsockets", "sqlite3", "libcurl"])
        run.store_floor = run.build_floor("store_floor", ["libwebsockets", "sqlite3", "libcurl"])
        sim = bench.Sim(run)
        try:
            run.soak(sim)
        finally:
            sim.proc.stop(signal.SIGKILL)
        rows[folder].append(run.results["soak"])
print("| binaries | CPU ms per transaction | by thread | switches per transaction | by thread | write calls / KiB to storage per transaction "
      "| floor CPU ms, writes / KiB | floor on the relay's rows CPU ms, writes / KiB |")
print("|---|---|---|---|---|---|---|---|")
for folder in folders:
    for r in rows[folder]:
        threads = ", ".join(f"{k} {v:.2f}" for k, v in r["switches_per_transaction_by_thread"].items() if v >= 0.05)
        cpu = ", ".join(f"{k} {v:.3f}" for k, v in r.get("cpu_ms_per_transaction_by_thread", {}).items() if v >= 0.005)
        writes = lambda x: f"{x['write_calls_per_transaction']:.1f} / {x['write_kib_per_transaction']:.1f}"
        print(f"| {folder} | {r['cpu_ms_per_transaction']:.3f} | {cpu} | {r['switches_per_transaction']:.1f} | {threads} | {writes(r)} "
              f"| {r['floor']['cpu_ms_per_transaction']:.3f}, {writes(r['floor'])} "
              f"| {r['store_floor']['cpu_ms_per_transaction']:.3f}, {writes(r['store_floor'])} |")
