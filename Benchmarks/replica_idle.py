#!/usr/bin/env python3
"""A replica at rest (`store.url`): a PostgreSQL server of its own (replicas.Postgres), the hub simulator and one
relay on it with one webhook sink; once it holds the link and took the history, 20 s pass, then each thread's
context switches (voluntary and not, /proc/PID/task/*/status) are counted over SECONDS. Not part of `make bench`.

    .venv/bin/python Benchmarks/replica_idle.py BIN_DIR [SECONDS]
"""
import sys, tempfile, time
from pathlib import Path
from types import SimpleNamespace
sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench, replicas
binp = Path(sys.argv[1]).resolve(); secs = int(sys.argv[2]) if len(sys.argv) > 2 else 60
work = Path(tempfile.mkdtemp(prefix="replica-idle-"))
pg = replicas.Postgres()
sim = bench.Sim(SimpleNamespace(bin=binp, work=work))
receiver = bench.Receiver()
db = f"idle_{time.monotonic_ns()}"; pg.psql(f"CREATE DATABASE {db}")
cfg = work / "relay.yaml"; cfg.write_text(f"sinks:\n  hook:\n    type: webhook\n    url: {receiver.url}\n")
env = {"ALLOWANCE_RELAY_SERVER_URL": sim.url, "ALLOWANCE_RELAY_SERVER_TOKEN": bench.TOKEN, "ALLOWANCE_RELAY_STORE_PATH": str(work / "r.sqlite"),
       "ALLOWANCE_RELAY_STORE_URL": f"postgres://bench@127.0.0.1:{pg.port}/{db}", "ALLOWANCE_RELAY_STORE_PASSWORD_FILE": pg.password_file,
       "ALLOWANCE_RELAY_STORE_REPLICA_NAME": "r0"}
r = bench.Proc("relay-idle", [str(binp / "allowance-relay"), "run", "--config", str(cfg)], env=env, workdir=work)
def snap():
    out = {}
    for t in Path(f"/proc/{r.p.pid}/task").iterdir():
        st = (t / "status").read_text()
        n = sum(int(l.split()[1]) for l in st.splitlines() if "ctxt_switches" in l)
        out[t.name] = ((t / "comm").read_text().strip(), n)
    return out
try:
    bench.wait_until(lambda: pg.psql("SELECT count(*) FROM relay_sync WHERE key IN ('last_catch_up', 'history_taken')", db) not in (None, "0"), 60, "link")
    time.sleep(20)
    a = snap(); time.sleep(secs); b = snap()
    agg = {}
    for tid, (name, n) in b.items():
        if tid in a: agg[name] = agg.get(name, 0) + n - a[tid][1]
    print(f"context switches in {secs} s at rest, by thread:", {k: v for k, v in sorted(agg.items()) if v})
finally:
    r.stop()
    receiver.close()
    sim.proc.stop()
    pg.close()
