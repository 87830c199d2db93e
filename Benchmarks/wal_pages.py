#!/usr/bin/env python3
"""Which pages a transaction writes, by table and index: the relay of BIN_DIR connected to the simulator with one
webhook sink, its log emptied, then N transactions at 20 a second; once every webhook is in, the database and its
write-ahead log are copied as they stand (the log not yet folded back), and each log frame of the copy's commits
is named by the B-tree that owns its page (SQLite's dbstat). Prints frames (pages written) per transaction, by B-tree.

    .venv/bin/python Benchmarks/wal_pages.py BIN_DIR [N]
"""
import collections, shutil, signal, sqlite3, struct, sys, tempfile, time, types
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import bench  # noqa: E402

folder, n = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 200
run = bench.Bench(types.SimpleNamespace(quick=False, bin=folder, relay_env=[], soak_seconds=10))
sim = bench.Sim(run)
copy = Path(tempfile.mkdtemp()) / "copy.sqlite"
try:
    with run.relay_to_receiver(sim, "wal-pages") as (relay, db, receiver):
        with sqlite3.connect(db, timeout=10) as c:
            c.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # the log from here on is these transactions'
        known = len(receiver.arrivals)
        bench.call("POST", sim.url + f"/_sim/paced?count={n}&rate=20", timeout=n + 60)
        bench.wait_until(lambda: len(receiver.arrivals) - known >= n, 60, "every webhook")
        time.sleep(1)  # the last outcomes, carried or alone
        for suffix in ("", "-wal"):
            shutil.copy(str(db) + suffix, str(copy) + suffix)
finally:
    sim.proc.stop(signal.SIGKILL)

wal = Path(str(copy) + "-wal").read_bytes()  # read before SQLite opens the copy and folds the log back
_, _, page_size, _, salt1, salt2 = struct.unpack(">IIIIII", wal[:24])
frames, offset = [], 32
while offset + 24 + page_size <= len(wal):
    page, commit, s1, s2 = struct.unpack(">IIII", wal[offset:offset + 16])
    if (s1, s2) != (salt1, salt2):
        break  # a frame of an earlier round of the log
    frames.append((page, commit))
    offset += 24 + page_size
while frames and frames[-1][1] == 0:
    frames.pop()  # an uncommitted tail
owner = {page: name for name, page in sqlite3.connect(copy).execute("SELECT name, pageno FROM dbstat")}
by_tree = collections.Counter(owner.get(page, "(freed)") for page, _ in frames)
commits = sum(1 for _, commit in frames if commit)
print(f"{len(frames)} frames in {commits} commits: {len(frames) / n:.2f} pages written per transaction")
for name, count in by_tree.most_common():
    print(f"  {name:32s} {count / n:5.2f}")
