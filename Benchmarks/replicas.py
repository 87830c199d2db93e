#!/usr/bin/env python3
"""Deliveries per second at the relay level (issue 35): the real relay as 1, 2 and 3 replicas on one PostgreSQL
server (`store.url`), and the relay on its SQLite file beside them, in one run, alternating, several rounds.

Each run: a fresh hub simulator, a fresh webhook receiver (peers/fast_receiver.py), a fresh database; the relays
start, one takes the hub link and the family's history; then a blast of N transactions (20 hub messages a frame),
one transaction.created webhook each, timed from the blast to the last webhook received. CPU seconds are the
relays' and the PostgreSQL server's (all its processes) over the blast. Release build first:
`deploy/build-release.sh --product allowance-relay --product allowance-hub-sim`.

    python3 Benchmarks/replicas.py [--bin .build/release] [--transactions 5000] [--rounds 3] [--setups sqlite,1,2,3]
"""
import argparse, glob, os, shutil, socket, statistics, subprocess, sys, tempfile, time
from types import SimpleNamespace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench  # noqa: E402  (Proc, Sim, Receiver, wait_until)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Postgres:
    """A durable PostgreSQL server of its own (fsync and synchronous_commit on, as a relay's database would run)."""

    def __init__(self):
        self.bindir = sorted(glob.glob("/usr/lib/postgresql/*/bin"))[-1]
        self.as_owner = ["setpriv", "--reuid=postgres", "--regid=postgres", "--init-groups", "--"] if os.getuid() == 0 else []
        self.folder = tempfile.mkdtemp(prefix="bench-replicas-pg-")
        self.password = "bench-" + os.urandom(6).hex()
        self.port = free_port()
        Path(f"{self.folder}/pw").write_text(self.password)
        if os.getuid() == 0:
            shutil.chown(self.folder, "postgres", "postgres")
            shutil.chown(f"{self.folder}/pw", "postgres", "postgres")
        subprocess.run(self.as_owner + [f"{self.bindir}/initdb", "-D", f"{self.folder}/data", "-U", "bench", f"--pwfile={self.folder}/pw",
                                        "--auth-host=scram-sha-256", "--auth-local=trust", "-E", "UTF8", "--locale=C"],
                       check=True, stdout=subprocess.DEVNULL)
        self.server = subprocess.Popen(self.as_owner + [f"{self.bindir}/postgres", "-D", f"{self.folder}/data", "-p", str(self.port),
                                                        "-k", self.folder, "-c", "listen_addresses=127.0.0.1"],
                                       stdout=open(f"{self.folder}/log", "w"), stderr=subprocess.STDOUT)
        bench.wait_until(lambda: self.psql("SELECT 1") == "1", 30, "PostgreSQL to start")
        self.password_file = f"{tempfile.mkdtemp(prefix='bench-replicas-secret-')}/pw"
        Path(self.password_file).write_text(self.password)
        os.chmod(self.password_file, 0o600)

    def psql(self, sql, database="postgres"):
        r = subprocess.run(self.as_owner + [f"{self.bindir}/psql", "-X", "-q", "-At", "-h", self.folder, "-p", str(self.port), "-U", "bench",
                                            "-d", database, "-c", sql], capture_output=True, text=True)
        return r.stdout.strip() if r.returncode == 0 else None

    def cpu_seconds(self):
        """CPU seconds of every process of the server (the postmaster and its backends)."""
        total, ticks = 0.0, os.sysconf("SC_CLK_TCK")
        for proc in Path("/proc").iterdir():
            try:
                if proc.name.isdigit() and (proc / "comm").read_text().strip() == "postgres":
                    stat = (proc / "stat").read_text().rsplit(")", 1)[1].split()
                    total += (int(stat[11]) + int(stat[12])) / ticks
            except (FileNotFoundError, ProcessLookupError, IndexError):
                pass
        return total

    def close(self):
        self.server.send_signal(2)
        self.server.wait(20)
        shutil.rmtree(self.folder, ignore_errors=True)


def run(args, pg, setup, n, work):
    sim = bench.Sim(SimpleNamespace(bin=Path(args.bin).resolve(), work=work))
    receiver = bench.Receiver()
    config = work / f"relay-{setup}-{time.monotonic_ns()}.yaml"
    config.write_text(f"""log:
  level: warning
sinks:
  hook:
    type: webhook
    url: {receiver.url}
rules:
  - event: transaction.created
    to: hook
    digest: false
""")
    replicas = 1 if setup == "sqlite" else int(setup)
    database = None
    if setup != "sqlite":
        database = f"bench_{time.monotonic_ns()}"
        pg.psql(f"CREATE DATABASE {database}")
    relays, files = [], []
    for i in range(replicas):
        files.append(str(work / f"{setup}-{i}-{time.monotonic_ns()}.sqlite"))
        env = {"ALLOWANCE_RELAY_SERVER_URL": sim.url, "ALLOWANCE_RELAY_SERVER_TOKEN": bench.TOKEN, "ALLOWANCE_RELAY_STORE_PATH": files[-1]}
        if database:
            env.update({"ALLOWANCE_RELAY_STORE_URL": f"postgres://bench@127.0.0.1:{pg.port}/{database}",
                        "ALLOWANCE_RELAY_STORE_PASSWORD_FILE": pg.password_file, "ALLOWANCE_RELAY_STORE_REPLICA_NAME": f"r{i}"})
        relays.append(bench.Proc(f"relay-{setup}-{i}", [str(Path(args.bin).resolve() / "allowance-relay"), "run", "--config", str(config)],
                                 env=env, workdir=work))
    try:
        if database:
            # 'last_catch_up' since the replicas run the one sync engine; 'history_taken' for builds before it.
            bench.wait_until(lambda: pg.psql("SELECT count(*) FROM relay_sync WHERE key IN ('last_catch_up', 'history_taken')",
                                             database) != "0", 60,
                             "a replica to take the link and the history")
            bench.wait_until(lambda: pg.psql("SELECT count(*) FROM relay_replicas WHERE seen_at > now() - interval '2 s'", database)
                             == str(replicas), 30, "every replica's heartbeat")
        else:
            bench.wait_until(lambda: bench.Bench.ready(None, files[0]), 60, "the relay to connect and catch up")
        time.sleep(1)
        known = set(receiver.arrivals)
        before = [r.status()["cpu"] for r in relays], pg.cpu_seconds()
        sim.post(f"/_sim/blast/prepare?count={n}&batch=20")
        t0 = time.time()
        sim.post("/_sim/blast/go")
        bench.wait_until(lambda: len(receiver.arrivals) - len(known) >= n, 600, "every webhook", every=0.05)
        times = sorted(t for k, t in list(receiver.arrivals.items()) if k not in known)
        after = [r.status()["cpu"] for r in relays], pg.cpu_seconds()
        return {"setup": setup, "transactions": n, "webhooks": len(times), "requests": receiver.count - len(known),
                "seconds": times[-1] - t0, "per_s": n / (times[-1] - t0),
                "relay_cpu_s": sum(a - b for a, b in zip(after[0], before[0])),
                "postgres_cpu_s": (after[1] - before[1]) if database else 0.0}
    finally:
        for r in relays:
            r.stop()
        receiver.close()
        sim.proc.stop()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=".build/release")
    ap.add_argument("--transactions", type=int, default=5000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--setups", default="sqlite,1,2,3")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-replicas-"))
    pg = Postgres()
    results = {}
    try:
        setups = args.setups.split(",")
        for _ in range(args.rounds):
            for setup in setups:
                r = run(args, pg, setup, args.transactions, work)
                results.setdefault(setup, []).append(r)
                print(f"{setup}: {r['per_s']:.0f} webhooks/s, {r['requests']} requests, relay CPU {r['relay_cpu_s']:.3f} s, "
                      f"PostgreSQL CPU {r['postgres_cpu_s']:.2f} s", file=sys.stderr, flush=True)
    finally:
        pg.close()
    print(f"| store | webhooks/s (each round) | median | relay CPU s (sum of replicas) | PostgreSQL CPU s | requests per webhook |")
    print(f"|---|---|---:|---:|---:|---:|")
    for setup in setups:
        rows = results[setup]
        name = "SQLite file, 1 relay" if setup == "sqlite" else f"PostgreSQL, {setup} replica{'s' if setup != '1' else ''}"
        each = ", ".join(f"{r['per_s']:.0f}" for r in rows)
        print(f"| {name} | {each} | {statistics.median(r['per_s'] for r in rows):.0f} | "
              f"{statistics.median(r['relay_cpu_s'] for r in rows):.3f} | {statistics.median(r['postgres_cpu_s'] for r in rows):.2f} | "
              f"{statistics.median(r['requests'] / r['transactions'] for r in rows):.3f} |")


if __name__ == "__main__":
    main()
