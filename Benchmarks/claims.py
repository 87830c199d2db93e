#!/usr/bin/env python3
"""The shared PostgreSQL queue (issue 35) with 1, 2 and 3 claimers, on a server of its own.

Starts a PostgreSQL cluster in a temporary folder with its durable defaults (fsync and synchronous_commit on, as a
relay's database would run), then runs `allowance-bench-claims` for each number of claimers, alternating, several
rounds, and prints a Markdown table. Release build first: `swift build -c release --product allowance-bench-claims`.

    python3 Benchmarks/claims.py [--bin .build/release] [--jobs 20000] [--batch 10] [--rounds 3]
"""
import argparse, glob, json, os, pwd, shutil, socket, statistics, subprocess, sys, tempfile, time

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=".build/release")
    ap.add_argument("--jobs", type=int, default=20000)
    ap.add_argument("--batch", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--claimers", default="1,2,3")
    args = ap.parse_args()
    bindir = sorted(glob.glob("/usr/lib/postgresql/*/bin"))[-1]
    as_owner = ["setpriv", "--reuid=postgres", "--regid=postgres", "--init-groups", "--"] if os.getuid() == 0 else []
    folder = tempfile.mkdtemp(prefix="bench-pg-")
    password = "bench-" + os.urandom(6).hex()
    port = free_port()
    with open(f"{folder}/pw", "w") as f:
        f.write(password)
    if os.getuid() == 0:
        shutil.chown(folder, "postgres", "postgres"); shutil.chown(f"{folder}/pw", "postgres", "postgres")
    subprocess.run(as_owner + [f"{bindir}/initdb", "-D", f"{folder}/data", "-U", "bench", f"--pwfile={folder}/pw",
                               "--auth-host=scram-sha-256", "--auth-local=trust", "-E", "UTF8", "--locale=C"],
                   check=True, stdout=subprocess.DEVNULL)
    server = subprocess.Popen(as_owner + [f"{bindir}/postgres", "-D", f"{folder}/data", "-p", str(port), "-k", folder,
                                          "-c", "listen_addresses=127.0.0.1"],
                              stdout=open(f"{folder}/log", "w"), stderr=subprocess.STDOUT)
    try:
        for _ in range(200):
            try:
                socket.create_connection(("127.0.0.1", port), 0.1).close(); break
            except OSError:
                time.sleep(0.05)
        time.sleep(0.5)
        url = f"postgres://bench@127.0.0.1:{port}/postgres"
        env = dict(os.environ, BENCH_PG_PASSWORD=password)
        results = {}
        counts = [int(c) for c in args.claimers.split(",")]
        for _ in range(args.rounds):
            for n in counts:
                out = subprocess.run([f"{args.bin}/allowance-bench-claims", url, str(n), str(args.jobs), str(args.batch)],
                                     env=env, check=True, capture_output=True, text=True).stdout
                r = json.loads(out.strip().splitlines()[-1])
                results.setdefault(n, []).append(r)
                print(f"claimers={n}: {r['perSecond']:.0f} jobs/s, client CPU {r['cpuSeconds']:.2f} s, repeats {r['repeats']}", file=sys.stderr)
        print(f"| claimers | jobs/s (each round) | median | client CPU s per 1,000 jobs | repeats |")
        print(f"|---:|---|---:|---:|---:|")
        for n in counts:
            rates = [r["perSecond"] for r in results[n]]
            cpu = statistics.median(r["cpuSeconds"] for r in results[n]) * 1000 / args.jobs
            print(f"| {n} | {', '.join(f'{x:,.0f}' for x in rates)} | {statistics.median(rates):,.0f} | {cpu:.3f} | "
                  f"{sum(r['repeats'] for r in results[n])} |")
    finally:
        server.terminate(); server.wait(10)
        shutil.rmtree(folder, ignore_errors=True)

if __name__ == "__main__":
    main()
