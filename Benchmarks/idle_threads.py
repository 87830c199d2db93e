#!/usr/bin/env python3
"""Relays at rest, thread by thread: the hub simulator and the relay with one webhook sink (and RULES, config lines
such as a summary rule), on its SQLite file, or with --replicas N as N replicas on a PostgreSQL server of their own
(replicas.Postgres; the first to start holds the link, the others stand by), or with --standbys N followed by N more
relays on the same SQLite file, each waiting as a standby. Once the link is up and the history taken, 20 s pass; then over SECONDS, for each relay, every thread's context switches (voluntary and not,
/proc/PID/task/*/status) and the threads it started (`perf stat` of its clone calls). Not part of `make bench`.

    .venv/bin/python Benchmarks/idle_threads.py BIN_DIR [--seconds 60] [--replicas N | --standbys N] [--rules YAML]
"""
import argparse, subprocess, sys, tempfile, time
from pathlib import Path
from types import SimpleNamespace
sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench, replicas

ap = argparse.ArgumentParser()
ap.add_argument("bin"); ap.add_argument("--seconds", type=int, default=60)
ap.add_argument("--replicas", type=int, default=0, help="0: one relay on its SQLite file")
ap.add_argument("--standbys", type=int, default=0, help="relays started on the first one's SQLite file")
ap.add_argument("--rules", default="", help='config lines, e.g. "rules:\\n  - name: m\\n    summary: daily at 07:00\\n    to: hook\\n"')
args = ap.parse_args()
binp = Path(args.bin).resolve(); secs = args.seconds
work = Path(tempfile.mkdtemp(prefix="idle-threads-"))
pg = replicas.Postgres() if args.replicas else None
sim = bench.Sim(SimpleNamespace(bin=binp, work=work))
receiver = bench.Receiver()
db = f"idle_{time.monotonic_ns()}"
if pg: pg.psql(f"CREATE DATABASE {db}")
cfg = work / "relay.yaml"
cfg.write_text(args.rules.encode().decode("unicode_escape") + f"sinks:\n  hook:\n    type: webhook\n    url: {receiver.url}\n")
def env(name, file=None):
    e = {"ALLOWANCE_RELAY_SERVER_URL": sim.url, "ALLOWANCE_RELAY_SERVER_TOKEN": bench.TOKEN,
         "ALLOWANCE_RELAY_STORE_PATH": str(work / f"{file or name}.sqlite")}
    if pg:
        e |= {"ALLOWANCE_RELAY_STORE_URL": f"postgres://bench@127.0.0.1:{pg.port}/{db}",
              "ALLOWANCE_RELAY_STORE_PASSWORD_FILE": pg.password_file, "ALLOWANCE_RELAY_STORE_REPLICA_NAME": name}
    return e
relays = {f"r{i}": bench.Proc(f"relay-idle-{i}", [str(binp / "allowance-relay"), "run", "--config", str(cfg)],
                              env=env(f"r{i}"), workdir=work) for i in range(max(1, args.replicas))}
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
def ready():
    if pg:
        return pg.psql("SELECT count(*) FROM relay_sync WHERE key IN ('last_catch_up', 'history_taken')", db) not in (None, "0")
    return bench.Bench.ready(None, str(work / "r0.sqlite"))
try:
    bench.wait_until(ready, 60, "link")
    for i in range(args.standbys if not pg else 0):
        relays[f"standby{i}"] = bench.Proc(f"relay-standby-{i}", [str(binp / "allowance-relay"), "run", "--config", str(cfg)],
                                           env=env(f"standby{i}", file="r0"), workdir=work)
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
    if pg: pg.close()
