#!/usr/bin/env python3
"""The relay with a large history (issue 35, item 4): a copy of a relay database grown to COUNT transactions over
100 children (sqlite3 inserts rows of the relay's own schema, spread over three years), then, against that copy:
the daemon's start-up (launch to its "starting" line: open, prune, requeue, rules installed), its resident memory
2 s later, and the `status` and `transactions` commands. Beside the same figures on the database before it grew.

    python3 Benchmarks/history.py --bin .build/release --base relay.sqlite [--count 1000000] [--runs 3]

`--base`: a database the relay made (run it once against the simulator). The hub is the simulator, started here.

    python3 Benchmarks/history.py --bin .build/release --catch-up [--count 1000000] [--missed 10000] [--sinks 50]

`--catch-up`: the same history on both sides for real: a simulator with 100 children and COUNT transactions over
three years, a relay with SINKS webhook sinks (on a closed port: the rows are planned, nothing is sent) that takes
the history in its first catch-up; then MISSED transactions while it is stopped, and its catch-up of them at the
next start: time to "caught up", delivery rows planned, resident memory.
"""
import argparse, json, os, shutil, signal, sqlite3, statistics, subprocess, sys, tempfile, time, urllib.request

GROW = """
BEGIN;
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i < 97)
INSERT INTO child (id, first_name, last_name, weekly_allowance_minor, balance_minor, updated_at)
SELECT printf('%08x-0000-4000-8000-%012x', i, i), 'Kid' || i, 'Family', 500, 10000, '2026-11-25T00:00:00.000Z' FROM n;
CREATE TEMP TABLE kids AS SELECT ROW_NUMBER() OVER (ORDER BY id) - 1 AS k, id FROM child;
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i < {count})
INSERT INTO txn (id, child_id, amount_minor, type, description, balance_after_minor, created_at, created_by, origin,
                 received_via, stored_at)
SELECT printf('%08x-%04x-4%03x-8%03x-%012x', i, i % 65536, i % 4096, i % 4096, i * 7919),
  (SELECT id FROM kids WHERE k = i % 100), 100 + i % 900, CASE WHEN i % 3 = 0 THEN 'Debit' ELSE 'Credit' END,
  'History ' || i, 10000, strftime('%Y-%m-%dT%H:%M:%fZ', '2023-11-25', '+' || (i * 94 / ({count} / 1000000.0)) || ' seconds'),
  'Parent', 'server', 'catch-up', strftime('%Y-%m-%dT%H:%M:%fZ', '2023-11-25', '+' || (i * 94) || ' seconds')
FROM n;
COMMIT;
"""

def timed(cmd, env):
    start = time.monotonic()
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.monotonic() - start

def start_up(relay, env):
    start = time.monotonic()
    p = subprocess.Popen([relay, "run"], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    seconds = None
    for line in p.stdout:
        if "starting" in line and "hub=" in line:
            seconds = time.monotonic() - start
            break
    time.sleep(2)
    rss = next((int(l.split()[1]) / 1024 for l in open(f"/proc/{p.pid}/status") if l.startswith("VmRSS:")), 0)
    p.send_signal(signal.SIGINT)
    p.communicate(timeout=30)
    return seconds, rss

def catch_up(args):
    folder = tempfile.mkdtemp(prefix="history-catch-up-")
    sim = subprocess.Popen([args.sim or f"{args.bin}/allowance-hub-sim", "--token", "t", "--children", "100",
                            "--history", str(args.count), "--log-level", "error"], stdout=subprocess.PIPE, text=True)
    url = next(l.split()[1] for l in sim.stdout if l.startswith("listening "))
    db = f"{folder}/relay.sqlite"
    sinks = "".join(f"  hook{i}:\n    type: webhook\n    url: http://127.0.0.1:9/closed\n" for i in range(args.sinks))
    rules = "rules:\n  - event: transaction.created\n    to: [" + ", ".join(f"hook{i}" for i in range(args.sinks)) + "]\n"
    with open(f"{folder}/relay.yaml", "w") as f:
        f.write(f"store:\n  path: {db}\nlog:\n  level: info\nsinks:\n{sinks}{rules}")
    env = dict(os.environ, ALLOWANCE_RELAY_SERVER_URL=url, ALLOWANCE_RELAY_SERVER_TOKEN="t", XDG_CONFIG_HOME=f"{folder}/config")

    def run_until_caught_up():
        start = time.monotonic()
        p = subprocess.Popen([f"{args.bin}/allowance-relay", "run", "--config", f"{folder}/relay.yaml"], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        seconds, lines = None, []
        for line in p.stdout:
            lines.append(line)
            if "caught up" in line:
                seconds = time.monotonic() - start
                break
        rss = next((int(l.split()[1]) / 1024 for l in open(f"/proc/{p.pid}/status") if l.startswith("VmHWM:")), 0)
        p.send_signal(signal.SIGINT)
        p.communicate(timeout=120)
        if seconds is None:
            sys.exit("the relay never caught up:\n" + "".join(lines[-20:]))
        return seconds, rss

    def count(sql):
        with sqlite3.connect(db) as c:
            return c.execute(sql).fetchone()[0]

    try:
        first, first_rss = run_until_caught_up()
        stored = count("SELECT COUNT(*) FROM txn")
        rows = count("SELECT COUNT(*) FROM delivery")
        before = json.load(urllib.request.urlopen(f"{url}/_sim/stats"))["transactions"]
        urllib.request.urlopen(urllib.request.Request(f"{url}/_sim/burst?count={args.missed}", method="POST")).read()
        while json.load(urllib.request.urlopen(f"{url}/_sim/stats"))["transactions"] < before + args.missed:
            time.sleep(0.1)
        second, second_rss = run_until_caught_up()
        print(f"| catch-up | transactions fetched | seconds to `caught up` | delivery rows planned | peak RSS MiB |")
        print(f"|---|---:|---:|---:|---:|")
        print(f"| first, a new database ({args.count:,} of history, 100 children) | {stored:,} | {first:.1f} | {rows:,} | {first_rss:.1f} |")
        print(f"| {args.missed:,} missed, {args.sinks} webhook sinks | {count('SELECT COUNT(*) FROM txn') - stored:,} | {second:.1f} | "
              f"{count('SELECT COUNT(*) FROM delivery') - rows:,} | {second_rss:.1f} |")
    finally:
        sim.terminate(); sim.wait()
        shutil.rmtree(folder, ignore_errors=True)

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=".build/release")
    ap.add_argument("--base", help="a relay database to grow (the start-up, status and transactions part)")
    ap.add_argument("--catch-up", action="store_true", help="the catch-up part instead")
    ap.add_argument("--missed", type=int, default=10_000)
    ap.add_argument("--sinks", type=int, default=50)
    ap.add_argument("--sim", help="the simulator binary (default: the one in --bin)")
    ap.add_argument("--count", type=int, default=1_000_000)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    if args.catch_up:
        return catch_up(args)
    if not args.base:
        ap.error("--base is needed (or --catch-up)")
    folder = tempfile.mkdtemp(prefix="history-")
    sim = subprocess.Popen([args.sim or f"{args.bin}/allowance-hub-sim", "--token", "t"], stdout=subprocess.PIPE, text=True)
    url = next(l.split()[1] for l in sim.stdout if l.startswith("listening "))
    try:
        small, large = f"{folder}/small.sqlite", f"{folder}/large.sqlite"
        shutil.copy(args.base, small); shutil.copy(args.base, large)
        subprocess.run(["sqlite3", large], input=GROW.format(count=args.count), text=True, check=True)
        rows = {}
        for name, db in (("as made", small), (f"{args.count:,} more transactions", large)):
            env = dict(os.environ, ALLOWANCE_RELAY_STORE_PATH=db, ALLOWANCE_RELAY_SERVER_URL=url, ALLOWANCE_RELAY_SERVER_TOKEN="t",
                       XDG_CONFIG_HOME=f"{folder}/config", ALLOWANCE_RELAY_LOG_LEVEL="info")
            starts, rss, status, listing = [], [], [], []
            for _ in range(args.runs):
                s, r = start_up(f"{args.bin}/allowance-relay", env)
                starts.append(s); rss.append(r)
                status.append(timed([f"{args.bin}/allowance-relay", "status"], env))
                listing.append(timed([f"{args.bin}/allowance-relay", "transactions", "--limit", "20"], env))
            size = sum(os.path.getsize(db + s) for s in ("", "-wal") if os.path.exists(db + s)) / 2**20
            rows[name] = (size, starts, rss, status, listing)
        print("| database | file MiB | start-up s | RSS after start MiB | `status` s | `transactions --limit 20` s |")
        print("|---|---:|---:|---:|---:|---:|")
        for name, (size, starts, rss, status, listing) in rows.items():
            f = lambda xs, d=2: ", ".join(f"{x:.{d}f}" for x in xs)
            print(f"| {name} | {size:,.0f} | {f(starts)} | {f(rss, 1)} | {f(status)} | {f(listing)} |")
    finally:
        sim.terminate(); sim.wait()
        shutil.rmtree(folder, ignore_errors=True)

if __name__ == "__main__":
    main()
