#!/usr/bin/env python3
"""The soak's load at several rates: for each rate, the relay of BIN_DIR (one webhook sink) takes RATE transactions
a second for SECONDS, then the two C floors take the same (`Benchmarks/floor/soak_floor.c`, the minimal one, and
`store_floor.c` on a copy of the relay's database); prints each one's CPU per transaction and the relay's ratio to
each floor. Whether the relay's cost over its floors is a fixed price per transaction or the cold start of each one
after a pause: the pause is 200 ms at 5 a second and 4 ms at 250.

    .venv/bin/python Benchmarks/soak_rates.py BIN_DIR [RATES] [SECONDS]      (RATES: 5,20,100,250; SECONDS: 30)
"""
import signal, sys, types
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import bench  # noqa: E402

folder = sys.argv[1]
rates = [int(r) for r in (sys.argv[2] if len(sys.argv) > 2 else "5,20,100,250").split(",")]
seconds = int(sys.argv[3]) if len(sys.argv) > 3 else 30
run = bench.Bench(types.SimpleNamespace(quick=False, bin=folder, relay_env=[], soak_seconds=seconds))
run.soak_floor = run.build_floor("soak_floor", ["libwebsockets", "sqlite3", "libcurl"])
run.store_floor = run.build_floor("store_floor", ["libwebsockets", "sqlite3", "libcurl"])
sim = bench.Sim(run)
rows = []
try:
    for rate in rates:
        n = rate * seconds
        with run.relay_to_receiver(sim, f"rate-{rate}") as (relay, db, receiver):
            template = run.copy_db(db, f"rate-{rate}-store-floor.sqlite")
            known = len(receiver.arrivals)
            start = relay.status()
            bench.call("POST", sim.url + f"/_sim/paced?count={n}&rate={rate}", timeout=seconds + 120)
            bench.wait_until(lambda: len(receiver.arrivals) - known >= n, 60, "every webhook")
            relay_ms = (relay.status()["cpu"] - start["cpu"]) * 1000 / n
        minimal = run.soak_floor_run(sim, rate, seconds, run.soak_floor, run.work / f"rate-{rate}-floor.sqlite",
                                     "the minimal floor")["cpu_ms_per_transaction"]
        on_rows = run.soak_floor_run(sim, rate, seconds, run.store_floor, template,
                                     "the floor on the relay's rows")["cpu_ms_per_transaction"]
        rows.append((rate, relay_ms, minimal, on_rows))
finally:
    sim.proc.stop(signal.SIGKILL)
print("| transactions a second | the relay, CPU ms per transaction | minimal floor (C) | floor on the relay's rows (C) "
      "| relay / minimal | relay / on its rows |")
print("|---:|---:|---:|---:|---:|---:|")
for rate, relay_ms, minimal, on_rows in rows:
    print(f"| {rate} | {relay_ms:.3f} | {minimal:.3f} | {on_rows:.3f} | {relay_ms / minimal:.2f} | {relay_ms / on_rows:.2f} |")
