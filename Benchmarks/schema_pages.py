#!/usr/bin/env python3
"""Pages per transaction for the relay's schema and changes to it that could write fewer: the schema copied from a
relay's database (DB), then for each variant a fresh file with HISTORY transactions, its log emptied, and N more,
each committed as the relay commits a soak transaction (the last delivery's outcome first, the transaction's row, the
balance's inbox row, the child's balance, one delivery row with a 466-byte alert). Prints the log's frames (pages
written) per transaction, by B-tree, as wal_pages.py does for the relay itself. Python's sqlite3 module on the
system's SQLite; it counts pages, not time.

    .venv/bin/python Benchmarks/schema_pages.py DB [HISTORY] [N]

Variants: `as is`; `txn WITHOUT ROWID` (the id index is the table); `no txn_recent` (one index fewer);
`delivery WITHOUT ROWID`; and their combinations.
"""
import collections, os, random, sqlite3, struct, sys, tempfile, time, uuid

source = sys.argv[1]
history = int(sys.argv[2]) if len(sys.argv) > 2 else 2000
n = int(sys.argv[3]) if len(sys.argv) > 3 else 400
with sqlite3.connect(f"file:{source}?mode=ro", uri=True) as c:
    schema = ";\n".join(sql for (sql,) in c.execute(
        "SELECT sql FROM sqlite_schema WHERE sql IS NOT NULL AND name NOT LIKE 'sqlite_%' ORDER BY rowid")) + ";"


def variant(name):
    s = schema
    if "txn WITHOUT ROWID" in name:
        s = s.replace("stored_at TEXT NOT NULL\n)", "stored_at TEXT NOT NULL\n) WITHOUT ROWID", 1)
    if "no txn_recent" in name:
        s = s.replace("CREATE INDEX txn_recent ON txn (created_at, stored_at);", "")
    if "delivery WITHOUT ROWID" in name:
        s = s.replace("trace_parent TEXT\n)", "trace_parent TEXT\n) WITHOUT ROWID", 1)
    assert (s == schema) == (name == "as is"), f"{name}: the schema did not change as meant"
    return s


def iso(t):
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + ".%03dZ" % int(t * 1000 % 1000)


def time_ordered(ms):  # a delivery's id: UUIDv7, as the relay makes them
    return "dlv_" + str(uuid.UUID(int=(ms << 80) | (0x7 << 76) | random.getrandbits(76)))


def run(name):
    path = os.path.join(tempfile.mkdtemp(), "pages.sqlite")
    c = sqlite3.connect(path, isolation_level=None)
    c.executescript(variant(name))
    c.execute("PRAGMA journal_mode=WAL")
    c.execute("PRAGMA wal_autocheckpoint=0")
    children = [str(uuid.uuid4()) for _ in range(3)]
    for child in children:
        c.execute("INSERT INTO child (id, first_name, last_name, weekly_allowance_minor, balance_minor, updated_at)"
                  " VALUES (?, 'A', 'B', 1000, 0, ?)", (child, iso(time.time())))
    t, previous = time.time() - 3600, None

    def one():
        nonlocal t, previous
        t += 0.05
        child = random.choice(children)
        c.execute("BEGIN IMMEDIATE")
        if previous:
            c.execute("UPDATE delivery SET state = 'delivered', attempts = attempts + 1, last_error = NULL,"
                      " delivered_at = ? WHERE id = ?", (iso(t), previous))
        c.execute("INSERT INTO txn (id, child_id, amount_minor, type, description, balance_after_minor, created_at,"
                  " created_by, origin, received_via, stored_at) VALUES (?, ?, 1316, 'Credit', 'Birthday gift', 2516,"
                  " ?, 'Simulator', 'server', 'hub', ?)", (str(uuid.uuid4()), child, iso(t), iso(t + 0.02)))
        c.execute("INSERT INTO inbox (kind, payload, received_at) VALUES ('BalanceUpdated', ?, ?)",
                  ('{"event":"BalanceUpdated","childId":"%s","balance":"25.16"}' % child, iso(t)))
        c.execute("UPDATE child SET balance_minor = 2516, updated_at = ? WHERE id = ?", (iso(t), child))
        previous = time_ordered(int(t * 1000))
        c.execute("INSERT INTO delivery (id, sink, rule, kind, child_id, urgency, alert, state, next_attempt_at,"
                  " created_at) VALUES (?, 'audit', 'all', 'transaction.created', ?, 'normal', ?, 'pending', ?, ?)",
                  (previous, child, "x" * 466, iso(t), iso(t)))
        c.execute("COMMIT")

    for _ in range(history):
        one()
    c.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    for _ in range(n):
        one()
    wal = open(path + "-wal", "rb").read()
    page_size, frames, offset = struct.unpack(">I", wal[8:12])[0], [], 32
    while offset + 24 + page_size <= len(wal):
        frames.append(struct.unpack(">I", wal[offset:offset + 4])[0])
        offset += 24 + page_size
    owner = {page: tree for tree, page in c.execute("SELECT name, pageno FROM dbstat")}
    by_tree = collections.Counter(owner.get(page, "(freed)") for page in frames)
    print(f"| {name} | {len(frames) / n:.2f} | " + ", ".join(f"{k} {v / n:.2f}" for k, v in by_tree.most_common()) + " |")


print("| schema | pages per transaction | by B-tree |")
print("|---|---:|---|")
for name in ["as is", "txn WITHOUT ROWID", "txn WITHOUT ROWID, no txn_recent", "txn WITHOUT ROWID, delivery WITHOUT ROWID",
             "txn WITHOUT ROWID, no txn_recent, delivery WITHOUT ROWID"]:
    run(name)
