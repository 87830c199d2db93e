#!/usr/bin/env python3
"""Calls counted per hub event by the SignalR client alone: BIN_DIR's allowance-bench-client (as in bench.py's
throughput part) takes 100,000 events at BATCH a frame (20 by default), and `perf stat` counts, on every thread of it,
the calls into the allocator (malloc, swift_allocObject) and the runtime's releases (swift_release), through the
uprobes `blast_counts.py` names. Counts, not time: a change too small for the host's spread in CPU seconds still
shows. The probes slow the client many times over: its CPU here means nothing.

    .venv/bin/python Benchmarks/client_counts.py BIN_DIR [BATCH] [PROTOCOL]

PROTOCOL is json (the default) or messagepack: the hub protocol both the client and the simulator speak.
"""
import signal, subprocess, sys, time, types
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import bench  # noqa: E402

EVENTS = ["probe_libc:malloc", "probe_libswiftCore:swift_allocObject", "probe_libswiftCore:swift_release"]
batch = int(sys.argv[2]) if len(sys.argv) > 2 else 20
protocol = sys.argv[3] if len(sys.argv) > 3 else "json"
run = bench.Bench(types.SimpleNamespace(quick=False, bin=sys.argv[1], relay_env=[]))
run.floor = "unused"  # clients() names the raw floor too; only our client runs here
sim = bench.Sim(run)
try:
    client = bench.Proc("client", run.clients(sim)["allowance-relay SignalR client"], workdir=run.work,
                        env={"BENCH_PROTOCOL": protocol})
    try:
        client.wait_line(lambda line: line == "connected", 60)
        time.sleep(2)
        sim.post(f"/_sim/blast/prepare?count={run.n // 2}&batch={batch}&protocol={protocol}")
        perf = subprocess.Popen(["perf", "stat", "-x", ",", "-e", ",".join(EVENTS), "-p", str(client.p.pid)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        time.sleep(1)
        sim.post("/_sim/blast/go")
        client.wait_line(lambda line: line.startswith("{"), 900)
        perf.send_signal(signal.SIGINT)
        _, err = perf.communicate()
    finally:
        client.stop(signal.SIGKILL)
finally:
    sim.proc.stop(signal.SIGKILL)
for name, count in bench.perf_stat_counts(err).items():
    print(f"{name:40} {count / run.n:8.2f} per event")
