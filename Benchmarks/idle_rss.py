#!/usr/bin/env python3
"""The idle relay's resident memory over time: the relay of BIN_DIR connected to the simulator with one webhook sink
(to a closed port), and VmRSS read at each of SECONDS after it has connected and caught up (default 5 30 180 600 900).

    .venv/bin/python Benchmarks/idle_rss.py BIN_DIR [SECONDS...]
"""
import signal, sys, time, types
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import bench  # noqa: E402

folder = sys.argv[1]
marks = [int(s) for s in sys.argv[2:]] or [5, 30, 180, 600, 900]
run = bench.Bench(types.SimpleNamespace(quick=False, bin=folder, relay_env=[], soak_seconds=10))
sim = bench.Sim(run)
try:
    relay, db = run.start_relay(sim, "idle-rss", "http://127.0.0.1:9/closed")
    bench.wait_until(lambda: run.ready(db), 60, "the relay to connect and catch up")
    t0 = time.monotonic()
    for mark in marks:
        time.sleep(max(0.0, mark - (time.monotonic() - t0)))
        print(f"{mark:5d} s after catching up: VmRSS {relay.status()['VmRSS']:.1f} MiB", flush=True)
    relay.stop(signal.SIGKILL)
finally:
    sim.proc.stop(signal.SIGKILL)
