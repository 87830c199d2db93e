#!/usr/bin/env python3
"""Replicas at rest (`store.url`): a PostgreSQL server of its own (replicas.Postgres), the hub simulator and REPLICAS
relays on it (1 unless given: the link holder; a second one is a standby) with one webhook sink; once one holds the
link and took the history, 20 s pass, then over SECONDS each relay's threads' context switches (voluntary and not,
/proc/PID/task/*/status) and the threads it started (`perf stat` of its clone calls, where perf can trace them).
Not part of `make bench`.

    .venv/bin/python Benchmarks/replica_idle.py BIN_DIR [SECONDS] [REPLICAS]
"""
import subprocess, sys, tempfile, time
from pathlib import Path
from types import SimpleNamespace
sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench, replicas
binp = Path(sys.argv[1]).resolve(); secs = int(sys.argv[2]) if len(sys.argv) > 2 else 60
count = int(sys.argv[3]) if len(sys.argv) > 3 else 1
work = Path(tempfile.mkdtemp(prefix="replica-idle-"))
pg = replicas.Postgres()
sim = bench.Sim(SimpleNamespace(bin=binp, work=work))
receiver = bench.Receiver()
db = f"idle_{time.monotonic_ns()}"; pg.psql(f"CREATE DATABASE {db}")
cfg = work / "relay.yaml"; cfg.write_text(f"sinks:\n  hook:\n    type: webhook\n    url: {receiver.url}\n")
def env(name):
    return {"ALLOWANCE_RELAY_SERVER_URL": sim.url, "ALLOWANCE_RELAY_SERVER_TOKEN": bench.TOKEN,
            "ALLOWANCE_RELAY_STORE_PATH": str(work / f"{name}.sqlite"),
            "ALLOWANCE_RELAY_STORE_URL": f"postgres://bench@127.0.0.1:{pg.port}/{db}",
            "ALLOWANCE_RELAY_STORE_PASSWORD_FILE": pg.password_file, "ALLOWANCE_RELAY_STORE_REPLICA_NAME": name}
relays = {f"r{i}": bench.Proc(f"relay-idle-{i}", [str(binp / "allowance-relay"), "run", "--config", str(cfg)],
                              env=env(f"r{i}"), workdir=work) for i in range(count)}
def snap(r):
    out = {}
    for t in Path(f"/proc/{r.p.pid}/task").iterdir():
        st = (t / "status").read_text()
        n = sum(int(l.split()[1]) for l in st.splitlines() if "ctxt_switches" in l)
        out[t.name] = ((t / "comm").read_text().strip(), n)
    return out
def clones(r):
    """`perf stat` counting the process's clone calls (each a thread started) over the window; None without perf."""
    try:
        return subprocess.Popen(["perf", "stat", "-x,", "-e", "syscalls:sys_enter_clone3,syscalls:sys_enter_clone",
                                 "-p", str(r.p.pid), "--", "sleep", str(secs)], stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True)
    except FileNotFoundError:
        return None
def counted(perf):
    if perf is None: return "perf not installed"
    lines = [l.split(",") for l in perf.communicate()[1].splitlines() if "clone" in l]
    return sum(int(l[0]) for l in lines if l[0].isdigit()) if lines else "perf could not trace"
try:
    bench.wait_until(lambda: pg.psql("SELECT count(*) FROM relay_sync WHERE key IN ('last_catch_up', 'history_taken')", db) not in (None, "0"), 60, "link")
    time.sleep(20)
    perfs = {n: clones(r) for n, r in relays.items()}
    a = {n: snap(r) for n, r in relays.items()}
    time.sleep(secs)
    b = {n: snap(r) for n, r in relays.items()}
    for n in relays:
        agg = {}
        for tid, (name, k) in b[n].items():
            if tid in a[n]: agg[name] = agg.get(name, 0) + k - a[n][tid][1]
        print(f"{n}: context switches in {secs} s at rest, by thread:", {k: v for k, v in sorted(agg.items()) if v},
              f"threads started: {counted(perfs[n])}")
finally:
    for r in relays.values(): r.stop()
    receiver.close()
    sim.proc.stop()
    pg.close()
