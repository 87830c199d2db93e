#!/usr/bin/env python3
"""`make bench`: allowance-relay side by side with other SignalR clients and with the machine's floor.

Starts every process itself (the hub simulator, our client, the relay, the Python peers, a raw libwebsockets
reader, a webhook receiver), measures, stops them, and writes BENCHMARKS.md plus the raw figures as JSON.

    bench.py [--quick] [--bin .build/release] [--out BENCHMARKS.md] [--json Benchmarks/results.json]

--quick runs every step with tiny counts (seconds, for CI: the harness still works); its figures mean nothing.
"""
import argparse
import contextlib
import datetime
import http.server
import json
import os
import platform
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TOKEN = "bench-token"


# --- processes -------------------------------------------------------------------------------------------------

class Proc:
    """A child process whose stdout lines are collected; stderr goes to a file (kept for failures)."""

    def __init__(self, name, argv, env=None, workdir=None):
        self.name = name
        self.lines = []
        self.err_path = Path(workdir or tempfile.gettempdir()) / f"{name}.stderr"
        self.err = open(self.err_path, "w")
        full_env = {k: v for k, v in os.environ.items() if not k.startswith("ALLOWANCE_RELAY_")}
        full_env.update(env or {})
        self.started = time.monotonic()
        self.p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=self.err, env=full_env, text=True, bufsize=1,
                                  start_new_session=True)
        self.cpu_group = cpu_accounting_group(f"{name}-{self.p.pid}", self.p.pid)
        CPU_CLOCKS_USED.add("ns" if self.cpu_group else "ticks")
        self.cond = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.p.stdout:
            with self.cond:
                self.lines.append(line.rstrip("\n"))
                self.cond.notify_all()
        with self.cond:
            self.cond.notify_all()

    def wait_line(self, predicate, timeout):
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                for line in self.lines:
                    if predicate(line):
                        return line
                left = deadline - time.monotonic()
                if left <= 0 or self.p.poll() is not None and not any(predicate(l) for l in self.lines):
                    if left > 0:
                        time.sleep(0.05)
                    raise RuntimeError(f"{self.name}: no expected line within {timeout} s; stdout: {self.lines[-5:]}; "
                                       f"stderr: {self.stderr_tail()}")
                self.cond.wait(min(left, 0.2))

    def stderr_tail(self):
        self.err.flush()
        return self.err_path.read_text(errors="replace")[-1500:]

    def commit_times(self):
        """Transaction id -> the wall-clock second (microsecond resolution) its hub events were committed, from the
        relay's debug lines "stored N hub event(s)" (JSON log format)."""
        times = {}
        self.err.flush()
        for line in self.err_path.read_text(errors="replace").splitlines():
            if not line.startswith("{") or '"unix_us"' not in line:
                continue
            entry = json.loads(line)
            for t in filter(None, entry.get("transactions", "").split(",")):
                times[t] = int(entry["unix_us"]) / 1e6
        return times

    def status(self):
        """VmRSS and VmHWM (peak) in MiB, CPU seconds, and context switches summed over all threads."""
        s = {}
        for line in Path(f"/proc/{self.p.pid}/status").read_text().splitlines():
            k, _, v = line.partition(":")
            if k in ("VmRSS", "VmHWM"):
                s[k] = int(v.split()[0]) / 1024
        stat = Path(f"/proc/{self.p.pid}/stat").read_text().rsplit(")", 1)[1].split()
        ticks = os.sysconf("SC_CLK_TCK")
        s["cpu"] = (int(stat[11]) + int(stat[12])) / ticks
        if self.cpu_group:  # the same, to the nanosecond, where the kernel's CPU accounting group could be made
            s["cpu"] = int((self.cpu_group / "cpuacct.usage").read_text()) / 1e9
        # Write calls (write, pwrite: SQLite's WAL frames and checkpoints, an eventfd poke; not socket sends) and the
        # bytes sent to storage.
        io = dict(line.split(": ") for line in Path(f"/proc/{self.p.pid}/io").read_text().splitlines())
        s["write_calls"], s["write_bytes"] = int(io["syscw"]), int(io["write_bytes"])
        s["switches"] = {}  # per thread: threads come and go, so deltas are taken per thread
        s["names"] = {}
        for task in Path(f"/proc/{self.p.pid}/task").iterdir():
            try:
                s["names"][task.name] = (task / "comm").read_text().strip()
                n = 0
                for line in (task / "status").read_text().splitlines():
                    if line.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")):
                        n += int(line.split()[1])
                    if line.startswith("voluntary_ctxt_switches"):
                        s.setdefault("voluntary", {})[task.name] = int(line.split()[1])
                s["switches"][task.name] = n
                # Time on a core, to the nanosecond (the scheduler's own count): where the CPU goes, by thread.
                s.setdefault("thread_cpu_ns", {})[task.name] = int((task / "schedstat").read_text().split()[0])
            except FileNotFoundError:
                pass
        return s

    def rss_by_mapping(self):
        """Resident KiB per mapped file (libraries, ICU data, the binary) and per kind of anonymous memory, from
        /proc/PID/smaps: where the resident pages go."""
        totals, current = {}, None
        with open(f"/proc/{self.p.pid}/smaps") as f:
            for line in f:
                head = line.split()
                if "-" in head[0] and len(head) >= 5 and ":" not in head[0]:
                    path = head[5] if len(head) >= 6 else ""
                    if path.startswith("/"):
                        current = Path(path).name
                    elif path.startswith("[") and path != "[heap]":
                        current = path
                    else:
                        current = "heap and anonymous (malloc, Swift objects, thread stacks)"
                elif head[0] == "Rss:":
                    totals[current] = totals.get(current, 0) + int(head[1])
        return dict(sorted(totals.items(), key=lambda kv: -kv[1]))

    @staticmethod
    def wakeups(start, end):
        """Context switches between two readings: threads alive at both count their delta, new ones all of theirs
        (a thread that ended in between is not counted)."""
        return sum(n - start["switches"].get(tid, 0) for tid, n in end["switches"].items())

    @staticmethod
    def wakeups_by_thread(start, end, key="switches"):
        """The same, per thread name (the Swift pool's threads share one name): where the context switches go.
        key="voluntary": only the switches where a thread went to sleep (waiting for work), not those where the
        scheduler took the core from it; key="thread_cpu_ns": each thread's time on a core instead."""
        by = {}
        for tid, n in end[key].items():
            name = end["names"].get(tid, "?")
            by[name] = by.get(name, 0) + n - start[key].get(tid, 0)
        return dict(sorted(by.items(), key=lambda kv: -kv[1]))

    def stop(self, sig=signal.SIGTERM, timeout=20):
        if self.p.poll() is None:
            os.killpg(self.p.pid, sig)
            try:
                self.p.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.p.pid, signal.SIGKILL)
                self.p.wait()
        self.err.close()
        if self.cpu_group:
            try:
                self.cpu_group.rmdir()
            except OSError:
                pass  # a task of it still exiting: the group is empty and harmless
        return self.p.returncode


CPU_ACCOUNTING = Path("/sys/fs/cgroup/cpuacct")
CPU_CLOCKS_USED = set()  # "ns", "ticks": what the processes of this run were measured with


def cpu_clock_of_run():
    return "ns" if CPU_CLOCKS_USED == {"ns"} else "ticks" if CPU_CLOCKS_USED <= {"ticks"} else "mixed"


def cpu_accounting_group(name, pid):
    """A cgroup (v1 cpuacct) holding the process `pid` and every thread it has and makes, or None where none can be
    made (not root, cgroup v2 only). /proc's CPU times count in ticks of 10 ms, which is 4-8% of the 0.12-0.3 CPU s
    a client spends on a blast; the group's `cpuacct.usage` counts nanoseconds, threads that ended included."""
    group = CPU_ACCOUNTING / f"allowance-bench-{name}"
    try:
        group.mkdir(exist_ok=True)
        (group / "cgroup.procs").write_text(str(pid))
        return group
    except OSError:
        return None


def call(method, url, timeout=600):
    req = urllib.request.Request(url, method=method, data=b"" if method == "POST" else None)
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return r.status, json.loads(r.read() or b"null")


def perf_stat_counts(output):
    """The counts `perf stat -x ,` wrote (its stderr), by event name."""
    counts = {}
    for line in output.splitlines():
        fields = line.split(",")
        if len(fields) > 3 and fields[0].replace(".", "").isdigit():
            counts[fields[2]] = float(fields[0])
    return counts


def perf_during_paced(perf_argv, pid, sim, receiver, count, rate):
    """`perf_argv` (perf and its options) attached to `pid` while the simulator sends `count` transactions at `rate`
    a second and `receiver` gets every webhook; what perf wrote to its stderr (its counts or its summary)."""
    perf = subprocess.Popen([*perf_argv, "-p", str(pid)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    time.sleep(1)
    known = len(receiver.arrivals)
    call("POST", sim.url + f"/_sim/paced?count={count}&rate={rate}", timeout=count // rate + 120)
    wait_until(lambda: len(receiver.arrivals) - known >= count, 120, "every webhook")
    time.sleep(0.5)
    perf.send_signal(signal.SIGINT)
    return perf.communicate()[1]


def wait_until(check, timeout, what, every=0.02):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(every)
    raise RuntimeError(f"timed out after {timeout} s waiting for {what}")


class Sim:
    def __init__(self, bench, port=0):
        self.bench = bench
        self.proc = Proc("hub-sim", [str(bench.bin / "allowance-hub-sim"), "--token", TOKEN, "--port", str(port),
                                     "--log-level", "error"], workdir=bench.work)
        line = self.proc.wait_line(lambda l: l.startswith("listening "), 60)
        self.url = line.split(" ", 1)[1]
        self.port = int(self.url.rsplit(":", 1)[1])

    def post(self, path):
        return call("POST", self.url + path)[1]

    def get(self, path):
        return call("GET", self.url + path)[1]


# --- the receiver for latency -----------------------------------------------------------------------------------

class Receiver:
    """A webhook receiver on loopback that notes when each alert arrived (time.time()) and for which transaction.
    peers/fast_receiver.py on its own asyncio loop in a thread: http.server tops out near 2,000 requests/s here,
    which would measure the receiver, not the relay."""

    def __init__(self):
        sys.path.insert(0, str(ROOT / "Benchmarks/peers"))
        import asyncio
        from fast_receiver import FastReceiver
        self.receiver = FastReceiver()
        self.arrivals = self.receiver.arrivals
        self.loop = asyncio.new_event_loop()
        ready = threading.Event()

        def serve():
            asyncio.set_event_loop(self.loop)
            self.port = self.loop.run_until_complete(self.receiver.serve())
            ready.set()
            self.loop.run_forever()

        threading.Thread(target=serve, daemon=True).start()
        ready.wait(10)
        self.url = f"http://127.0.0.1:{self.port}/hook"

    @property
    def count(self):
        return self.receiver.count

    def close(self):
        self.loop.call_soon_threadsafe(self.receiver.server.close)
        self.loop.call_soon_threadsafe(self.loop.stop)


def spread(values):
    """p50, p99 and the largest of `values` (ms), and how many there were."""
    return {"p50": percentile(values, 50), "p99": percentile(values, 99), "max": max(values), "n": len(values)}


def percentile(values, p):
    if not values:
        return None
    v = sorted(values)
    return v[min(len(v) - 1, max(0, round(p / 100 * len(v) + 0.5) - 1))]


# --- the benchmark ----------------------------------------------------------------------------------------------

class Bench:
    def __init__(self, args):
        self.quick = args.quick
        self.args = args
        self.bin = Path(args.bin).resolve()
        self.work = Path(tempfile.mkdtemp(prefix="allowance-bench-"))
        self.python = str(ROOT / ".venv/bin/python")
        self.results = {"quick": self.quick}
        self.n = 2_000 if self.quick else 100_000  # hub events (two per transaction)

    def log(self, text):
        print(f"[bench {time.strftime('%H:%M:%S')}] {text}", flush=True)

    def build_floor(self, name, libraries):
        """Compiles Benchmarks/floor/NAME.c against `libraries` (pkg-config names)."""
        out = self.work / name
        flags = subprocess.run(["pkg-config", "--cflags", "--libs", *libraries], check=True, capture_output=True,
                               text=True).stdout.split()
        # Any C compiler: the Swift toolchain brings clang if the machine has no cc.
        cc = next((c for c in ("cc", "gcc", "clang") if shutil.which(c)), None)
        if cc is None:
            raise RuntimeError("no C compiler (cc, gcc or clang) for the floor")
        subprocess.run([cc, "-O2", "-o", str(out), str(ROOT / f"Benchmarks/floor/{name}.c"), *flags], check=True)
        return out

    def clients(self, sim):
        """Each throughput client: name -> argv (they all print "connected" and then one JSON result line)."""
        base, count = sim.url, str(self.n)
        return {
            "floor (raw libwebsockets, C)": [str(self.floor), "127.0.0.1", str(sim.port), f"/hubs/family?access_token={TOKEN}",
                                             count],
            "allowance-relay SignalR client": [str(self.bin / "allowance-bench-client"), base, TOKEN, count],
            "allowance-relay SignalR client, MessagePack": [str(self.bin / "allowance-bench-client"), base, TOKEN, count],
            "pysignalr 1.3.3": [self.python, str(ROOT / "Benchmarks/peers/pysignalr_count.py"), base, TOKEN, count],
            "pysignalr 1.3.3, MessagePack": [self.python, str(ROOT / "Benchmarks/peers/pysignalr_count.py"), base, TOKEN, count,
                                             "messagepack"],
            "signalrcore 1.0.2": [self.python, str(ROOT / "Benchmarks/peers/signalrcore_count.py"), base, TOKEN, count],
        }

    def relay_config(self, name, sink_url, listen=None):
        d = self.work / name
        d.mkdir(exist_ok=True)
        cfg = d / "relay.yaml"
        cfg.write_text(f"""store:
  path: {d}/relay.sqlite
log:
  level: warning
  format: json
{f"status:{chr(10)}  listen: {listen}" if listen else ""}
sinks:
  hook:
    type: webhook
    url: {sink_url}
rules:
  - event: transaction.created
    to: hook
    digest: false
""")
        return cfg, d / "relay.sqlite"

    def start_relay(self, sim, name, sink_url, listen=None, log_level=None, log_format=None, transport=None):
        cfg, db = self.relay_config(name, sink_url, listen)
        env = {"ALLOWANCE_RELAY_SERVER_URL": sim.url, "ALLOWANCE_RELAY_SERVER_TOKEN": TOKEN}
        env.update(dict(pair.split("=", 1) for pair in self.args.relay_env))
        if transport:
            env["ALLOWANCE_RELAY_SERVER_TRANSPORTS"] = transport
        if log_level:
            env["ALLOWANCE_RELAY_LOG_LEVEL"] = log_level
        if log_format:
            env["ALLOWANCE_RELAY_LOG_FORMAT"] = log_format
        relay = Proc(name, [str(self.bin / "allowance-relay"), "run", "--config", str(cfg)], env=env, workdir=self.work)
        return relay, db

    @contextlib.contextmanager
    def relay_to_receiver(self, sim, name, settle=True, **options):
        """A relay with one webhook sink pointing at a fresh Receiver, connected and caught up (and, with `settle`,
        left a moment to go quiet); both stopped afterwards."""
        receiver = Receiver()
        relay, db = self.start_relay(sim, name, receiver.url, **options)
        try:
            wait_until(lambda: self.ready(db), 60, "the relay to connect and catch up")
            if settle:
                time.sleep(1 if self.quick else 3)
            yield relay, db, receiver
        finally:
            relay.stop()
            receiver.close()

    @staticmethod
    def db_count(db, sql):
        try:
            with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5) as c:
                return c.execute(sql).fetchone()[0]
        except sqlite3.OperationalError:
            return None

    def ready(self, db):
        """Connected, and the first catch-up done (sync idle)."""
        try:
            with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5) as c:
                rows = dict(c.execute("SELECT key, value FROM sync_state WHERE key IN ('link', 'status')").fetchall())
                return (json.loads(rows.get("link", "{}")).get("state") == "connected"
                        and json.loads(rows.get("status", "{}")).get("phase") == "idle")
        except (sqlite3.OperationalError, json.JSONDecodeError):
            return False

    def link_up(self, db):
        try:
            with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5) as c:
                row = c.execute("SELECT value FROM sync_state WHERE key = 'link'").fetchone()
                return row and json.loads(row[0])["state"] == "connected"
        except (sqlite3.OperationalError, json.JSONDecodeError):
            return False

    # 1 + 3: throughput and memory ----------------------------------------------------------------------------
    def throughput(self, sim):
        """Both framings: 20 messages per WebSocket frame (a server batching under load), then 1 (ASP.NET Core's
        default). A fresh simulator for each, so that the relay's first catch-up has only the seeded family."""
        self.results["throughput"] = self.throughput_at(sim, 20)
        sim.proc.stop(signal.SIGKILL)
        self.storage()
        sim = Sim(self)
        self.results["throughput_1"] = self.throughput_at(sim, 1)
        return sim

    def throughput_at(self, sim, batch, relay=True):
        """The relay first (unless not `relay`), then each client on the same kind of stream."""
        rows = {}
        if relay:
            self.relay_throughput_at(sim, batch, rows)
        for name, argv in self.clients(sim).items():
            self.log(f"throughput, {batch} per frame: {name}")
            protocol = "messagepack" if name.endswith("MessagePack") else "json"
            c = Proc(name.split()[0], argv, workdir=self.work, env={"BENCH_PROTOCOL": protocol})
            try:
                c.wait_line(lambda l: l == "connected", 60)
                time.sleep(1 if self.quick else 3)
                idle = c.status()
                prep = sim.post(f"/_sim/blast/prepare?count={self.n // 2}&batch={batch}&protocol={protocol}")
                t0 = time.monotonic()
                sim.post("/_sim/blast/go")
                line = c.wait_line(lambda l: l.startswith("{"), 900)
                wall = time.monotonic() - t0
                own = json.loads(line)
                s = c.status()
                rows[name] = {"events": own["events"], "seconds_wall": wall, "seconds_first_to_last": own["seconds"],
                              "events_per_s": own["events"] / wall, "rss_idle_mib": idle["VmRSS"],
                              "rss_peak_mib": s["VmHWM"], "cpu_s": s["cpu"] - idle["cpu"], "frames": prep["frames"]}
                self.log(f"  {rows[name]['events_per_s']:.0f} events/s, peak RSS {s['VmHWM']:.1f} MiB")
            finally:
                c.stop(signal.SIGKILL)
        return rows

    def relay_throughput_at(self, sim, batch, rows):
        # The whole pipeline: the relay binary stores each event durably, runs the rules and writes the delivery rows.
        # Its sink points at a closed port: the rows are written, and sending does not compete for the CPU.
        name = "allowance-relay run (stored, rules, delivery rows)"
        self.log(f"throughput, {batch} per frame: {name}")
        relay, db = self.start_relay(sim, f"pipeline-{batch}", "http://127.0.0.1:9/closed")
        try:
            wait_until(lambda: self.ready(db), 60, "the relay to connect and catch up")
            # The store floor starts from the same database: the relay's schema and family, before its blast.
            template = self.copy_db(db, f"store-floor-{batch}.sqlite")
            rows[name] = self.blast_stored(sim, batch, relay, db, "the relay")
        finally:
            relay.stop()
        if batch == 20:
            self.pipeline_db = db  # the storage part measures it
        self.store_floor_throughput_at(sim, batch, rows, template)

    def copy_db(self, db, name):
        """A copy of the relay's database as it stands (SQLite's backup), for a floor to start from."""
        copy = self.work / name
        copy.unlink(missing_ok=True)
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5) as src, sqlite3.connect(copy) as dst:
            src.backup(dst)
        return copy

    def store_floor_throughput_at(self, sim, batch, rows, db):
        """The same blast through Benchmarks/floor/store_floor.c, on a copy of the relay's database taken before
        its blast: the relay's rows for each event, in C, committed durably once the socket has nothing more waiting."""
        name = "floor: the relay's rows (C: libwebsockets, SQLite)"
        self.log(f"throughput, {batch} per frame: {name}")
        proc = Proc(f"store-floor-{batch}", [str(self.store_floor), "127.0.0.1", str(sim.port), f"/hubs/family?access_token={TOKEN}",
                                    str(db)], workdir=self.work)
        try:
            proc.wait_line(lambda l: l == "connected", 30)
            rows[name] = self.blast_stored(sim, batch, proc, db, "the store floor")
        finally:
            proc.stop()

    def blast_stored(self, sim, batch, proc, db, who):
        """A blast of self.n events at `batch` per frame, timed until `proc` (connected) has stored every one in `db`."""
        time.sleep(1 if self.quick else 3)
        idle = proc.status()
        # The newest rowids, not COUNT(*): a full count every few ms would take CPU from the writer and hold read
        # transactions that keep SQLite from checkpointing its WAL. Each transaction is a row in txn, and the balance
        # the hub sends right behind it lands in the same commit (the decoder holds a transaction up to 2 ms for it):
        # as an inbox row before schema v24, as that transaction's balance after since. Before schema v22 every event
        # was an inbox row.
        keyed = self.db_count(db, "SELECT COUNT(*) FROM pragma_table_info('inbox') WHERE name = 'dedup_key'") != 0
        stored, per_event = ("SELECT MAX(seq) FROM inbox", 1) if keyed else ("SELECT MAX(rowid) FROM txn", 2)
        before = self.db_count(db, stored) or 0
        deliveries_before = self.db_count(db, "SELECT COUNT(*) FROM delivery") or 0
        sim.post(f"/_sim/blast/prepare?count={self.n // 2}&batch={batch}")
        t0 = time.monotonic()
        sim.post("/_sim/blast/go")
        wait_until(lambda: ((self.db_count(db, stored) or 0) - before) * per_event >= self.n, 900,
                   f"{who} to store every event", every=0.02)
        wall = time.monotonic() - t0
        s = proc.status()
        deliveries = (self.db_count(db, "SELECT COUNT(*) FROM delivery") or 0) - deliveries_before
        row = {"events": self.n, "seconds_wall": wall, "events_per_s": self.n / wall, "rss_idle_mib": idle["VmRSS"],
               "rss_peak_mib": s["VmHWM"], "cpu_s": s["cpu"] - idle["cpu"], "delivery_rows": deliveries}
        self.log(f"  {row['events_per_s']:.0f} events/s, {deliveries} delivery rows, {row['cpu_s']:.2f} CPU s, "
                 f"peak RSS {s['VmHWM']:.1f} MiB")
        return row

    # 6: storage --------------------------------------------------------------------------------------------------
    def storage(self):
        db = self.pipeline_db
        size = lambda: sum(p.stat().st_size for p in db.parent.glob(db.name + "*"))
        full = size()
        out = subprocess.run([str(self.bin / "allowance-relay"), "store", "prune", "--inbox-days", "0", "--deliveries-days", "0",
                              "--json"], env={**os.environ, "ALLOWANCE_RELAY_STORE_PATH": str(db)}, capture_output=True,
                             text=True, check=True)
        pruned = json.loads(out.stdout)
        self.results["storage"] = {"events": self.n, "bytes": full, "bytes_per_100k_events": full * 100_000 / self.n,
                                   "bytes_after_prune": size(), "pruned": pruned}
        self.log(f"storage: {full / 1e6:.1f} MB for {self.n} events; {size() / 1e6:.1f} MB after the prune")

    # 2: latency --------------------------------------------------------------------------------------------------
    def latency(self, sim):
        rows = {}
        # The relay logs each commit's moment (`unix_us`, debug level) on the wall clock the simulator stamps its
        # sends with: one clock, microseconds. Over WebSockets at two rates, then over Server-Sent Events and Long
        # Polling at the lower one.
        runs = [("websockets", "", ((100, 50), (1000, 200)) if self.quick else ((100, 1000), (1000, 5000)))]
        for transport, label in (("server_sent_events", ", Server-Sent Events"), ("long_polling", ", Long Polling")):
            runs.append((transport, label, ((100, 50),) if self.quick else ((100, 1000),)))
        for transport, label, paces in runs:
            with self.relay_to_receiver(sim, f"latency-{transport}", settle=False, log_level="debug", log_format="json",
                                        transport=transport) as (relay, db, receiver):
                # Hub events per second; each transaction is two events (TransactionCreated and BalanceUpdated).
                for rate, count in paces:
                    self.log(f"latency: {count} transactions at {rate} hub events/s over {transport}")
                    sent, webhook = self.paced_to_webhook(sim, rate, count, lambda: receiver.arrivals)
                    stored = relay.commit_times()
                    commit = [(stored[k] - t) * 1000 for k, t in sent.items() if k in stored]
                    row = {"transactions": count, "commit_ms": spread(commit), "webhook_ms": spread(webhook)}
                    rows[f"{rate} events/s{label}"] = row
                    self.log(f"  hub->commit p50 {row['commit_ms']['p50']:.2f} p99 {row['commit_ms']['p99']:.2f} ms; "
                             f"hub->webhook p50 {row['webhook_ms']['p50']:.2f} p99 {row['webhook_ms']['p99']:.2f} "
                             f"max {row['webhook_ms']['max']:.2f} ms")
            if transport == "websockets":
                for rate, count in paces:
                    rows[f"{rate} events/s, the minimal C floor"] = self.latency_floor(sim, rate, count)
        self.results["latency"] = rows

    def latency_floor(self, sim, rate, count):
        """The same paced transactions through the minimal C floor (Benchmarks/floor/soak_floor.c: a durable commit
        per burst, then its POST, on one thread): what this machine's fsync and loopback allow a program with nothing
        else to do, in the same sitting as the relay's figures. A tail the floor shares is the machine's."""
        receiver = Receiver()
        db = self.work / "latency_floor.sqlite"
        for path in db.parent.glob(db.name + "*"):
            path.unlink()
        proc = self.connected_floor(self.soak_floor, sim, db, receiver)
        try:
            self.log(f"latency: {count} transactions at {rate} hub events/s, the minimal C floor")
            # The floor posts the id as the frame spelled it (the simulator writes upper case); sent-times are lower.
            _, webhook = self.paced_to_webhook(
                sim, rate, count, lambda: {k.lower(): t for k, t in list(receiver.arrivals.items())})
        finally:
            proc.stop()
            receiver.close()
        row = {"transactions": count, "commit_ms": None, "webhook_ms": spread(webhook)}
        self.log(f"  hub->webhook p50 {row['webhook_ms']['p50']:.2f} p99 {row['webhook_ms']['p99']:.2f} "
                 f"max {row['webhook_ms']['max']:.2f} ms")
        return row

    def paced_to_webhook(self, sim, rate, count, arrivals):
        """`count` transactions paced at `rate` hub events/s (two events each); once every one has reached the
        receiver (`arrivals()`: transaction id -> arrival time), their send times and hub-to-webhook times in ms."""
        sent_before = set(sim.get("/_sim/sent-times"))
        sim.post(f"/_sim/paced?count={count}&rate={rate / 2}")
        sent = {k: v for k, v in sim.get("/_sim/sent-times").items() if k not in sent_before}
        wait_until(lambda: all(k in arrivals() for k in sent), 120, "every webhook")
        seen = arrivals()
        return sent, [(seen[k] - t) * 1000 for k, t in sent.items()]

    def connected_floor(self, program, sim, db, receiver):
        """A C floor (soak_floor or store_floor) on `db`, posting to `receiver`, connected to the hub and settled. If
        it never connects, it is stopped and the receiver closed before the error goes up."""
        proc = Proc(program.name, [str(program), "127.0.0.1", str(sim.port), f"/hubs/family?access_token={TOKEN}",
                                   str(db), receiver.url], workdir=self.work)
        try:
            proc.wait_line(lambda l: l == "connected", 30)
        except BaseException:
            proc.stop()
            receiver.close()
            raise
        time.sleep(1)
        return proc

    # 5: webhooks: one sink, a receiver that answers at once ------------------------------------------------------
    def webhooks(self, sim):
        """A blast of transactions, one transaction.created alert each, to one webhook sink on loopback."""
        n = 500 if self.quick else 20_000
        with self.relay_to_receiver(sim, "webhooks") as (relay, db, receiver):
            idle = relay.status()
            known = set(receiver.arrivals)
            sim.post(f"/_sim/blast/prepare?count={n}&batch=20")
            t0 = time.time()
            sim.post("/_sim/blast/go")
            wait_until(lambda: len(receiver.arrivals) - len(known) >= n, 600, "every webhook", every=0.05)
            s = relay.status()
            times = sorted(t for k, t in list(receiver.arrivals.items()) if k not in known)
            row = {"transactions": n, "webhooks": len(times), "requests": receiver.count,
                   "seconds_blast_to_last": times[-1] - t0, "seconds_first_to_last": times[-1] - times[0],
                   "webhooks_per_s": n / (times[-1] - t0), "webhooks_per_s_sustained": n / max(1e-9, times[-1] - times[0]),
                   "cpu_s": s["cpu"] - idle["cpu"], "rss_peak_mib": s["VmHWM"]}
            self.log(f"webhooks: {n} in {row['seconds_blast_to_last']:.2f} s from the blast: {row['webhooks_per_s']:.0f}/s "
                     f"({row['webhooks_per_s_sustained']:.0f}/s first to last), {row['cpu_s']:.1f} CPU s")
        self.results["webhooks"] = row

    # 7: soak: a steady family's load for a long time ------------------------------------------------------------
    def soak(self, sim):
        """20 transactions a second with one webhook sink, for 15 minutes: CPU per transaction, and whether the
        resident memory levels off after the first minute."""
        seconds, rate = (20, 20) if self.quick else (self.args.soak_seconds, 20)
        with self.relay_to_receiver(sim, "soak") as (relay, db, receiver):
            template = self.copy_db(db, "soak-store-floor.sqlite")  # for the floor on the relay's rows
            known = len(receiver.arrivals)
            self.log(f"soak: {rate} transactions/s for {seconds} s, one webhook sink")
            pacer = threading.Thread(target=lambda: call("POST", sim.url + f"/_sim/paced?count={rate * seconds}&rate={rate}",
                                                           timeout=seconds + 120), daemon=True)
            start = relay.status()
            t0 = time.monotonic()
            pacer.start()
            samples = []
            while pacer.is_alive():
                time.sleep(1 if self.quick else 10)
                st = relay.status()
                samples.append({"t": time.monotonic() - t0, "rss_mib": st["VmRSS"], "cpu_s": st["cpu"] - start["cpu"],
                                "webhooks": len(receiver.arrivals) - known})
            wait_until(lambda: len(receiver.arrivals) - known >= rate * seconds, 60, "every webhook of the soak")
            end = relay.status()
            minute = next((x for x in samples if x["t"] >= 60), samples[0])
            n = rate * seconds
            row = {"seconds": seconds, "rate": rate, "transactions": n,
                   "cpu_ms_per_transaction": (end["cpu"] - start["cpu"]) * 1000 / n,
                   "switches_per_transaction": Proc.wakeups(start, end) / n,
                   "write_calls_per_transaction": (end["write_calls"] - start["write_calls"]) / n,
                   "write_kib_per_transaction": (end["write_bytes"] - start["write_bytes"]) / 1024 / n,
                   "switches_per_transaction_by_thread": {k: v / n for k, v in Proc.wakeups_by_thread(start, end).items()},
                   "cpu_ms_per_transaction_by_thread": {
                       k: v / 1e6 / n for k, v in Proc.wakeups_by_thread(start, end, "thread_cpu_ns").items()},
                   "voluntary_switches_per_transaction_by_thread": {
                       k: v / n for k, v in Proc.wakeups_by_thread(start, end, "voluntary").items()},
                   "rss_start_mib": start["VmRSS"], "rss_after_1_min_mib": minute["rss_mib"], "rss_end_mib": end["VmRSS"],
                   "rss_growth_after_1_min_mib": end["VmRSS"] - minute["rss_mib"], "samples": samples}
            self.log(f"  {row['cpu_ms_per_transaction']:.3f} ms CPU, {row['switches_per_transaction']:.1f} context switches, "
                     f"{row['write_calls_per_transaction']:.1f} write calls and {row['write_kib_per_transaction']:.1f} KiB to storage "
                     f"per transaction; RSS {row['rss_after_1_min_mib']:.1f} MiB after 1 min, {row['rss_end_mib']:.1f} MiB at the end")
            self.log("  context switches per transaction by thread: " + ", ".join(
                f"{k} {v:.2f}" for k, v in row["switches_per_transaction_by_thread"].items() if v >= 0.05)
                + "; of which voluntary (the thread went to sleep): " + ", ".join(
                f"{k} {v:.2f}" for k, v in row["voluntary_switches_per_transaction_by_thread"].items() if v >= 0.05))
        floor_seconds = min(seconds, 120)
        row["floor"] = self.soak_floor_run(sim, rate, floor_seconds, self.soak_floor, self.work / "soak_floor.sqlite",
                                           "the floor (C: libwebsockets, SQLite, libcurl)")
        row["store_floor"] = self.soak_floor_run(sim, rate, floor_seconds, self.store_floor, template,
                                                 "the floor on the relay's rows (C)")
        self.results["soak"] = row

    def soak_floor_run(self, sim, rate, seconds, program, db, name):
        """The same load through a C floor with one webhook: Benchmarks/floor/soak_floor.c, the least work that
        stores each transaction durably and sends its webhook, or store_floor.c, which writes the relay's own rows
        (inbox, transaction, balance, delivery row and its outcome) into a copy of the relay's database. Each gives
        the CPU per transaction that is left once the relay's own program is taken away."""
        receiver = Receiver()
        proc = self.connected_floor(program, sim, db, receiver)
        try:
            known = len(receiver.arrivals)
            start = proc.status()
            call("POST", sim.url + f"/_sim/paced?count={rate * seconds}&rate={rate}", timeout=seconds + 120)
            wait_until(lambda: len(receiver.arrivals) - known >= rate * seconds, 60, "every webhook of the floor's soak")
            end = proc.status()
        finally:
            proc.stop()
            receiver.close()
        row = {"seconds": seconds, "transactions": rate * seconds,
               "cpu_ms_per_transaction": (end["cpu"] - start["cpu"]) * 1000 / (rate * seconds), "rss_mib": end["VmRSS"],
               "switches_per_transaction": Proc.wakeups(start, end) / (rate * seconds),
               "write_calls_per_transaction": (end["write_calls"] - start["write_calls"]) / (rate * seconds),
               "write_kib_per_transaction": (end["write_bytes"] - start["write_bytes"]) / 1024 / (rate * seconds)}
        self.log(f"  {name}: {row['cpu_ms_per_transaction']:.3f} ms CPU, {row['switches_per_transaction']:.1f} context "
                 f"switches, {row['write_calls_per_transaction']:.1f} write calls and {row['write_kib_per_transaction']:.1f} "
                 f"KiB to storage per transaction over {seconds} s")
        return row

    # 4: idle cost, every client connected at once -----------------------------------------------------------------
    def idle(self, sim):
        seconds = 5 if self.quick else 180
        self.log(f"idle: every client connected and idle for {seconds} s")
        procs = {}
        try:
            relay, db = self.start_relay(sim, "idle", "http://127.0.0.1:9/closed")
            procs["allowance-relay run"] = relay
            for name, argv in self.clients(sim).items():
                if name.startswith("floor"):
                    continue  # it reads and counts, and does not answer pings: the server drops it after 30 s
                procs[name] = Proc("idle-" + name.split()[0], argv, workdir=self.work)
            for name, program in self.memory_floors().items():
                procs[name] = Proc("idle-" + program.name, [str(program)], workdir=self.work)
            wait_until(lambda: self.ready(db), 60, "the relay to connect and catch up")
            for name, p in procs.items():
                if p is not relay:
                    p.wait_line(lambda l: l == "connected", 60)
            time.sleep(2)
            start = {name: p.status() for name, p in procs.items()}
            time.sleep(seconds)
            rows = {}
            for name, p in procs.items():
                end = p.status()
                scale = 3600 / seconds
                rows[name] = {"seconds": seconds, "cpu_s_per_hour": (end["cpu"] - start[name]["cpu"]) * scale,
                              "wakeups_per_hour": Proc.wakeups(start[name], end) * scale,
                              "rss_mib": end["VmRSS"]}
                if p is relay:
                    rows[name]["rss_kib_by_mapping"] = p.rss_by_mapping()
                    # Where the relay's wake-ups come from, per thread name, per hour.
                    rows[name]["wakeups_per_hour_by_thread"] = {
                        k: v * scale for k, v in Proc.wakeups_by_thread(start[name], end).items() if v}
                self.log(f"  {name}: {rows[name]['cpu_s_per_hour']:.2f} CPU s/h, {rows[name]['wakeups_per_hour']:.0f} wakeups/h, "
                         f"RSS {end['VmRSS']:.1f} MiB")
                for thread, n in rows[name].get("wakeups_per_hour_by_thread", {}).items():
                    self.log(f"    {thread}: {n:.0f} wakeups/h")
        finally:
            for p in procs.values():
                p.stop(signal.SIGKILL)
        self.results["idle"] = rows

    def memory_floors(self):
        """The idle-memory floors (Benchmarks/floor/rss_*.swift), compiled here: the relay's stack doing nothing."""
        swiftc = shutil.which("swiftc")
        if swiftc is None:
            return {}
        floors = {}
        # The Debian package links the Swift runtime and Foundation in (--static-swift-stdlib): its floor is that
        # program linked the same way.
        for name, source, flags in (
                ("floor: Swift, Foundation and the C libraries, doing nothing", "rss_foundation", []),
                ("floor: the same, linked in as the package is (-static-stdlib)", "rss_foundation", ["-static-stdlib"]),
                ("floor: Swift and the C libraries without Foundation, doing nothing", "rss_bare", []),
                ("floor: Swift concurrency, one empty task run, then nothing", "idle_concurrency", [])):
            out = self.work / (source + ("_static" if flags else ""))
            subprocess.run([swiftc, "-O", *flags, "-o", str(out), str(ROOT / f"Benchmarks/floor/{source}.swift")],
                           check=True, capture_output=True)
            floors[name] = out
        return floors

    # 5: recovery -------------------------------------------------------------------------------------------------
    def recovery(self, sim):
        rows = {}
        port = sim.port
        relay, db = self.start_relay(sim, "recovery", "http://127.0.0.1:9/closed")
        try:
            wait_until(lambda: self.link_up(db), 60, "the relay to connect")
            self.log("recovery: the hub killed, back after 2 s")
            sim.proc.stop(signal.SIGKILL)
            wait_until(lambda: not self.link_up(db), 60, "the relay to notice")
            time.sleep(2)
            sim = Sim(self, port)
            back = time.monotonic()
            wait_until(lambda: self.link_up(db), 120, "the relay to reconnect", every=0.005)
            rows["reconnect_after_hub_restart_s"] = time.monotonic() - back
            self.log(f"  connected again {rows['reconnect_after_hub_restart_s']:.3f} s after the hub accepted again")
        finally:
            relay.stop()
        # Catch-up, on the restarted (fresh) simulator: a relay with its own database syncs, stops, misses N
        # transactions (recorded by the server, never pushed), and is started again.
        relay, db = self.start_relay(sim, "catch-up", "http://127.0.0.1:9/closed")
        wait_until(lambda: self.link_up(db), 60, "the relay to connect")
        time.sleep(1)
        relay.stop()
        for missed in (100, 1000) if self.quick else (1000, 10000):
            sim.post(f"/_sim/blast/prepare?count={missed}&batch=20")
            t0 = time.monotonic()
            relay, db = self.start_relay(sim, "catch-up", "http://127.0.0.1:9/closed", log_level="info")
            try:
                def caught_up():
                    text = relay.err_path.read_text(errors="replace")
                    return next((l for l in text.splitlines() if '"msg":"caught up"' in l), None)
                line = wait_until(caught_up, 300, f"the catch-up of {missed}", every=0.005)
                took = time.monotonic() - t0
                stored = json.loads(line).get("transactions")
                if str(stored) != str(missed):
                    raise RuntimeError(f"caught up {stored} transactions, expected {missed}: {line}")
                rows[f"catch_up_{missed}_s"] = took
                self.log(f"recovery: {missed} missed transactions caught up {took:.2f} s after the relay started")
            finally:
                relay.stop()
        self.results["recovery"] = rows
        return sim

    def environment(self):
        def out(*argv):
            try:
                return subprocess.run(argv, capture_output=True, text=True, timeout=30).stdout.strip()
            except (OSError, subprocess.TimeoutExpired):
                return "?"
        cpu = next((l.split(":", 1)[1].strip() for l in Path("/proc/cpuinfo").read_text().splitlines()
                    if l.startswith("model name")), platform.processor())
        mem = int(Path("/proc/meminfo").read_text().split()[1]) / 1024 / 1024
        self.results["environment"] = {
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "machine": f"{os.cpu_count()} cores ({cpu}), {mem:.0f} GiB, {platform.platform()}",
            "swift": out("swift", "--version").splitlines()[0] if out("swift", "--version") else "?",
            "libwebsockets": out("pkg-config", "--modversion", "libwebsockets"),
            "sqlite": sqlite3.sqlite_version,
            "python": platform.python_version(),
            "binaries": str(self.bin.relative_to(ROOT)) if self.bin.is_relative_to(ROOT) else str(self.bin),
            "command": "make bench" if not self.quick else "make bench-quick",
        }

    def run(self, parts):
        self.environment()
        self.floor = self.build_floor("lws_floor", ["libwebsockets"])
        self.soak_floor = self.build_floor("soak_floor", ["libwebsockets", "sqlite3", "libcurl"])
        self.store_floor = self.build_floor("store_floor", ["libwebsockets", "sqlite3", "libcurl"])
        # A fresh simulator for each part: a relay's first catch-up then fetches only the seeded family.
        for part in (getattr(self, p) for p in parts):
            sim = Sim(self)
            try:
                sim = part(sim) or sim
            finally:
                sim.proc.stop(signal.SIGKILL)


# --- the report -------------------------------------------------------------------------------------------------

def report(r):
    env, tp = r["environment"], r["throughput"]
    ours = tp["allowance-relay SignalR client"]["events_per_s"]
    floor = tp["floor (raw libwebsockets, C)"]["events_per_s"]
    lines = [
        "# Benchmarks",
        "",
        f"`{env['command']}` on {env['date']}: {env['machine']}. {env['swift']}; libwebsockets {env['libwebsockets']}; "
        f"SQLite {env['sqlite']} (Python's, for reading); Python {env['python']}; binaries from `{env['binaries']}`.",
        "Every process was started and stopped by `Benchmarks/bench.py`; raw figures in `Benchmarks/results.json`.",
        "The source is the bundled hub simulator (Hummingbird), in the same run for every client.",
        "",
    ]
    clocks = {"ns": "to the nanosecond (`cpuacct.usage` of a cgroup made for each process)",
              "ticks": "in 10 ms ticks (`/proc/PID/stat`)",
              "mixed": "to the nanosecond for the processes a cgroup could be made for, in 10 ms ticks for the others"}
    by_part = env.get("cpu_clock_by_part", {})
    clock = env.get("cpu_clock", "ticks")
    lines[-1:-1] = [f"CPU times are the kernel's, user and system, all threads: {clocks[clock]}"
                    + "".join(f"; {part}'s {clocks[c]}" for part, c in by_part.items() if c != clock) + "."]
    if env.get("merged"):
        lines[-1:-1] = ["Parts run again later and merged in (`bench.py --parts ... --merge`): "
                        + ", ".join(f"{part} on {date}" for part, date in env["merged"].items()) + "."]
    if r["quick"]:
        lines += ["**Quick mode: tiny counts to check the harness; these figures mean nothing.**", ""]
    one = r.get("throughput_1", {})
    lines += [
        f"## 1. Throughput: {tp['floor (raw libwebsockets, C)']['events']:,} hub events pushed at once",
        "",
        "Half TransactionCreated (a full transaction object), half BalanceUpdated, as fast as the simulator writes: "
        "20 messages per WebSocket frame (a server batching under load), then 1 per frame (ASP.NET Core's default). "
        "Wall time from the push to the last event handled; CPU is the process's own (user + system) over that time.",
        "",
        "| client | 20/frame events/s | events per CPU s | peak RSS MiB | 1/frame events/s | events per CPU s | peak RSS MiB |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]

    def cells(row):
        if not row:
            return "| | |"
        per_cpu = row["events"] / row["cpu_s"] if row["cpu_s"] > 0 else float("nan")
        return f"{row['events_per_s']:,.0f} | {per_cpu:,.0f} | {row['rss_peak_mib']:.1f}"

    for name, row in tp.items():
        lines.append(f"| {name} | {cells(row)} | {cells(one.get(name))} |")
    pipeline = tp["allowance-relay run (stored, rules, delivery rows)"]["events_per_s"]
    lines += ["", f"At 20 per frame our client reaches {ours / floor:.0%} of the floor's rate; the whole pipeline "
              f"{pipeline:,.0f} events/s (each event committed to SQLite with `synchronous=FULL`, its rules run and its "
              "delivery row written).", ""]
    store_floor, relay_name = "floor: the relay's rows (C: libwebsockets, SQLite)", "allowance-relay run (stored, rules, delivery rows)"
    if tp.get(store_floor):
        def beside(rows, label):
            sf, relay_row = rows[store_floor], rows[relay_name]
            return (f"{sf['events_per_s']:,.0f} events/s on {sf['cpu_s']:.2f} CPU s at {label} (the relay "
                    f"{relay_row['events_per_s'] / sf['events_per_s']:.0%} of that rate on {relay_row['cpu_s'] / sf['cpu_s']:.2f}x the CPU)")
        framings = [beside(tp, "20 per frame")] + ([beside(one, "1 per frame")] if one.get(store_floor) else [])
        lines += [f"The floor for the whole pipeline (`Benchmarks/floor/store_floor.c`) writes the relay's rows for each "
                  "event in C, into a copy of the relay's database taken before its blast, one thread, committed once "
                  f"the socket has nothing more waiting: {' and '.join(framings)}.", ""]
    mp = tp.get("allowance-relay SignalR client, MessagePack")
    pymp = tp.get("pysignalr 1.3.3, MessagePack")
    if mp and pymp:
        lines += [f"With MessagePack (the simulator writing what ASP.NET Core writes: maps keyed by property names, "
                  f"decimals as text, dates as timestamps) our client handles {mp['events_per_s']:,.0f} events/s at 20 per "
                  f"frame ({mp['events_per_s'] / ours:.2f}x its JSON rate), pysignalr {pymp['events_per_s']:,.0f}.", ""]
    lat = r["latency"]
    lines += [
        "## 2. Latency: hub send to SQLite commit, and to the webhook receiver",
        "",
        "The relay with one webhook sink (a receiver on loopback); transactions paced by the simulator. "
        "Send times are the simulator's wall clock; commit times the relay's, logged after each commit at microseconds "
        "(`stored N hub event(s)`, debug level); webhook times the receiver's: one clock on one machine. "
        "Over WebSockets unless the row names Server-Sent Events or Long Polling (`server.transports`).",
        "",
    ]
    if r.get("latency_note"):
        lines += [f"({r['latency_note']}.)", ""]
    lines += [
        "| hub events/s | transactions | commit p50 ms | commit p99 ms | commit max ms | webhook p50 ms | webhook p99 ms | webhook max ms |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for rate, row in lat.items():
        c, w = row["commit_ms"], row["webhook_ms"]
        commit = "| – | – | –" if c is None else f"| {c['p50']:.1f} | {c['p99']:.1f} | {c['max']:.1f}"
        lines.append(f"| {rate} | {row['transactions']:,} {commit} | {w['p50']:.1f} | {w['p99']:.1f} | {w['max']:.1f} |")
    if any(row["commit_ms"] is None for row in lat.values()):
        lines += ["", "The minimal C floor (`Benchmarks/floor/soak_floor.c`: a durable commit per burst, then its POST, "
                  "one thread) ran the same paced transactions after the relay, in the same sitting: a tail it shares "
                  "is this machine's fsync, not the relay's."]
    idle = r["idle"]
    lines += [
        "",
        f"## 3 and 4. Memory and idle cost: every client connected at once, idle for {next(iter(idle.values()))['seconds']} s",
        "",
        "Pings only (the simulator pings every 15 s and drops a client silent for 30 s; clients ping per their "
        "library). Wakeups are context switches summed over all threads; both scaled to an hour. A peer that the "
        "simulator dropped and that did not reconnect shows 0.",
        "",
        "| process | RSS idle MiB | CPU s per hour | wakeups per hour |",
        "|---|---:|---:|---:|",
    ]
    for name, row in idle.items():
        lines.append(f"| {name} | {row['rss_mib']:.1f} | {row['cpu_s_per_hour']:.2f} | {row['wakeups_per_hour']:,.0f} |")
    by_thread = idle.get("allowance-relay run", {}).get("wakeups_per_hour_by_thread")
    if by_thread:
        lines += ["", "Where the idle relay's wake-ups come from (context switches per hour, by thread name; the Swift "
                  "pool's threads share one name):", "", "| thread | wakeups per hour |", "|---|---:|"]
        for thread, n in by_thread.items():
            lines.append(f"| {thread} | {n:,.0f} |")
    relay_idle = idle.get("allowance-relay run", {}).get("rss_kib_by_mapping")
    if relay_idle:
        total = sum(relay_idle.values())
        lines += ["", f"Where the idle relay's {total / 1024:.1f} MiB of resident pages go (`/proc/PID/smaps`, the ten largest):",
                  "", "| mapping | resident KiB | share |", "|---|---:|---:|"]
        for name, kib in list(relay_idle.items())[:10]:
            lines.append(f"| {name} | {kib:,} | {kib / total:.0%} |")
    rec = r["recovery"]
    lines += ["", "## 5. Recovery", "", "| what | seconds |", "|---|---:|",
              f"| hub killed, back after 2 s: connected again after it accepted | {rec['reconnect_after_hub_restart_s']:.3f} |"]
    for k, v in rec.items():
        if k.startswith("catch_up_"):
            lines.append(f"| relay restarted with {int(k.split('_')[2]):,} transactions missed: caught up after start | {v:.2f} |")
    st = r["storage"]
    lines += ["", "## 6. Storage", "",
              f"{st['events']:,} events from the pipeline run (transactions, inbox rows, delivery rows): "
              f"{st['bytes'] / 1e6:.1f} MB, so {st['bytes_per_100k_events'] / 1e6:.1f} MB per 100,000 events; "
              f"{st['bytes_after_prune'] / 1e6:.1f} MB after `allowance-relay store prune --inbox-days 0 --deliveries-days 0` "
              f"(inbox and delivered rows deleted, transactions kept, file vacuumed).", ""]
    wh = r.get("webhooks")
    if wh:
        lines += ["", "## 7. Webhooks: one sink, a receiver on loopback that answers at once", "",
                  f"{wh['transactions']:,} transactions blasted through the hub (20 per frame), one `transaction.created` "
                  "alert each to one webhook sink (default concurrency 4); the receiver is `Benchmarks/peers/fast_receiver.py`.",
                  "", "| figure | value |", "|---|---:|",
                  f"| webhooks per second, blast to last arrival | {wh['webhooks_per_s']:,.0f} |",
                  f"| webhooks per second, first to last arrival | {wh['webhooks_per_s_sustained']:,.0f} |",
                  f"| relay CPU seconds (storing {2 * wh['transactions']:,} events too) | {wh['cpu_s']:.2f} |",
                  f"| requests the receiver saw (repeats would show here) | {wh['requests']:,} |",
                  f"| relay peak RSS, MiB | {wh['rss_peak_mib']:.1f} |"]
    so = r.get("soak")
    if so:
        lines += ["", f"## 8. Soak: {so['rate']} transactions a second for {so['seconds'] // 60} minutes, one webhook sink", "",
                  "| figure | value |", "|---|---:|",
                  f"| relay CPU per transaction, end to end (hub, store, rules, webhook) | {so['cpu_ms_per_transaction']:.3f} ms |",
                  f"| resident memory at the start / after 1 minute / at the end | {so['rss_start_mib']:.1f} / "
                  f"{so['rss_after_1_min_mib']:.1f} / {so['rss_end_mib']:.1f} MiB |",
                  f"| growth after the first minute | {so['rss_growth_after_1_min_mib']:+.2f} MiB |"]
        fl, sf = so.get("floor"), so.get("store_floor")
        if fl:
            lines.append(f"| the floor's CPU per transaction (`Benchmarks/floor/soak_floor.c`, the same load for "
                         f"{fl['seconds']} s) | {fl['cpu_ms_per_transaction']:.3f} ms |")
        if sf:
            lines.append(f"| the floor on the relay's rows (`Benchmarks/floor/store_floor.c` with a webhook, the same "
                         f"load for {sf['seconds']} s) | {sf['cpu_ms_per_transaction']:.3f} ms |")
        if fl:
            lines += ["", "The floor is C on the relay's three libraries: it reads the hub, commits each transaction's "
                      "events and its delivery row durably (WAL, synchronous=FULL) and POSTs the webhook over a kept-alive "
                      "connection, with no rules, templates, signing, logging or second thread."]
        if sf:
            lines += ["", "The floor on the relay's rows does the same, but writes what the relay writes for each "
                      "transaction (the rows `Benchmarks/floor/store_floor.c` lists: each event's record, the balance, "
                      "the delivery row with its alert and then its outcome) into a copy of the relay's database."]
        lines += [""]
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--bin", default=str(ROOT / ".build/release"))
    ap.add_argument("--out", default=str(ROOT / "BENCHMARKS.md"))
    ap.add_argument("--json", default=str(ROOT / "Benchmarks/results.json"))
    ap.add_argument("--notes", default=str(ROOT / "Benchmarks/notes.md"),
                    help="hand-written analysis appended to the report (what limits each figure, before/after)")
    ap.add_argument("--parts", default="throughput,latency,webhooks,idle,recovery,soak", help="a subset, for working on one figure")
    ap.add_argument("--relay-env", action="append", default=[], metavar="KEY=VALUE",
                    help="an environment variable for every relay started (ALLOWANCE_RELAY_TELEMETRY_OTLP_ENDPOINT=..., say)")
    ap.add_argument("--soak-seconds", type=int, default=900, help="the soak's length (a shorter probe while working on it)")
    ap.add_argument("--report-only", action="store_true", help="rewrite the report from --json and --notes, measure nothing")
    ap.add_argument("--merge", action="store_true",
                    help="with --parts: replace those parts' figures in --json and write the report again")
    args = ap.parse_args()
    if args.report_only:
        text = report(json.loads(Path(args.json).read_text()))
        if Path(args.notes).exists():
            text += "\n" + Path(args.notes).read_text()
        Path(args.out).write_text(text + "\n")
        print(f"wrote {args.out}")
        return
    bench = Bench(args)
    bench.run(args.parts.split(","))
    bench.results["environment"]["cpu_clock"] = cpu_clock_of_run()
    if args.parts != ap.get_default("parts") and not args.merge:
        print(json.dumps(bench.results, indent=2))
        return
    if args.merge:
        # A partial run replaces its own parts' figures and keeps the rest; the report dates each part run again.
        earlier = json.loads(Path(args.json).read_text())
        env = {**earlier["environment"], "binaries": bench.results["environment"]["binaries"]}
        env["merged"] = {**env.get("merged", {}), **{p: bench.results["environment"]["date"] for p in args.parts.split(",")}}
        if env.get("cpu_clock", "ticks") != bench.results["environment"]["cpu_clock"]:
            env["cpu_clock_by_part"] = {**env.get("cpu_clock_by_part", {}), **{
                p: bench.results["environment"]["cpu_clock"] for p in args.parts.split(",")}}
        bench.results = {**earlier, **bench.results, "environment": env}
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(bench.results, indent=2) + "\n")
    text = report(bench.results)
    if Path(args.notes).exists() and not args.quick:
        text += "\n" + Path(args.notes).read_text()
    Path(args.out).write_text(text + "\n")
    print(f"wrote {args.out} and {args.json}")


if __name__ == "__main__":
    main()
