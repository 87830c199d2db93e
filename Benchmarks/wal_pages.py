#!/usr/bin/env python3
"""Which pages a transaction writes, by table and index: the relay of BIN_DIR connected to the simulator with one
webhook sink, its log emptied, then N transactions at 20 a second; once every webhook is in, the database and its
write-ahead log are copied as they stand (the log not yet folded back), and each log frame of the copy's commits
is named by the B-tree that owns its page (SQLite's dbstat). Prints frames (pages written) per transaction, by
B-tree, and the distinct pages among them (what a checkpoint then writes back into the database file).

Each program is counted twice. First as the last webhook arrives: every transaction committed, and the outcome of
every send but the last, which each program carries with its next write. That is the same durable work for all,
as in a stream that goes on. Then 1 s later, with whatever each program writes at the end of the stream: the relay
writes its last outcomes alone once its 200 ms wait for a next write is over, while the floors leave theirs for a
next transaction that does not come.

With --floors, the same load and the same count for the two C floors the soak compares with
(`Benchmarks/floor/soak_floor.c`, the minimal one, on a fresh file; `store_floor.c`, on a copy of the relay's
database taken before its transactions), so that the relay's pages read beside theirs from one run.

    .venv/bin/python Benchmarks/wal_pages.py BIN_DIR [N] [--floors]
"""
import collections, shutil, signal, sqlite3, struct, sys, tempfile, time, types
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import bench  # noqa: E402

args = [a for a in sys.argv[1:] if not a.startswith("--")]
folder, n, floors = args[0], int(args[1]) if len(args) > 1 else 200, "--floors" in sys.argv
run = bench.Bench(types.SimpleNamespace(quick=False, bin=folder, relay_env=[], soak_seconds=10))
sim = bench.Sim(run)
scratch = Path(tempfile.mkdtemp())


def empty_log(db):
    with sqlite3.connect(db, timeout=10) as c:
        c.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # the log from here on is these transactions'


def paced(db, receiver, name):
    """N transactions at 20 a second; once every webhook is in, a copy of the database and its log as they stand.
    A read transaction held open from the start keeps every frame in the log: no checkpoint can start it over (the
    minimal floor's would, past 1,000 pages), whatever each program's checkpoint setting."""
    pin = sqlite3.connect(db, timeout=10, isolation_level=None)
    try:
        pin.execute("BEGIN")
        pin.execute("SELECT count(*) FROM sqlite_schema").fetchall()
        known = len(receiver.arrivals)
        bench.call("POST", sim.url + f"/_sim/paced?count={n}&rate=20", timeout=n + 60)
        bench.wait_until(lambda: len(receiver.arrivals) - known >= n, 60 + n / 20, "every webhook", every=0.002)
        at_last_webhook = copy_of(db, name + "-at-last-webhook")
        time.sleep(1)  # the last outcomes, written alone or left for a next write
        return at_last_webhook, copy_of(db, name)
    finally:
        pin.close()


def copy_of(db, name):
    copy = scratch / f"{name}.sqlite"
    for suffix in ("", "-wal"):
        shutil.copy(str(db) + suffix, str(copy) + suffix)
    return copy


def count(copy):
    """Frames of the log's commits (one page each), by the B-tree that owns the page, per transaction."""
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
    return frames, collections.Counter(owner.get(page, "(freed)") for page, _ in frames)


def report(name, copy):
    frames, by_tree = count(copy)
    commits = sum(1 for _, commit in frames if commit)
    distinct = len({page for page, _ in frames})
    print(f"{name}: {len(frames)} frames in {commits} commits: {len(frames) / n:.2f} pages written per transaction "
          f"({distinct / n:.2f} distinct: a checkpoint's writes)")
    for tree, k in by_tree.most_common():
        print(f"  {tree:32s} {k / n:5.2f}")


copies = []
try:
    with run.relay_to_receiver(sim, "wal-pages") as (relay, db, receiver):
        template = run.copy_db(db, "wal-pages-store-floor.sqlite")
        empty_log(db)
        copies.append(("the relay", paced(db, receiver, "relay")))
    if floors:
        soak_floor = run.build_floor("soak_floor", ["libwebsockets", "sqlite3", "libcurl"])
        store_floor = run.build_floor("store_floor", ["libwebsockets", "sqlite3", "libcurl"])
        for name, program, db in (("the minimal floor (soak_floor.c)", soak_floor, run.work / "wal-pages-floor.sqlite"),
                                  ("the floor on the relay's rows (store_floor.c)", store_floor, template)):
            receiver = bench.Receiver()
            proc = run.connected_floor(program, sim, db, receiver)
            try:
                empty_log(db)
                copies.append((name, paced(db, receiver, program.name)))
            finally:
                proc.stop()
                receiver.close()
finally:
    sim.proc.stop(signal.SIGKILL)

for name, (at_last_webhook, after) in copies:
    report(name + ", at the last webhook", at_last_webhook)
    report(name + ", 1 s later", after)
