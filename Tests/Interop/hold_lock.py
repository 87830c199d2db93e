"""Holds an exclusive write lock on a SQLite database, as a second program writing to it would.

    hold_lock.py DB SECONDS
Prints "listening locked" once the lock is held, keeps it SECONDS, then commits and exits.
"""
import sqlite3
import sys
import time

db, seconds = sys.argv[1], float(sys.argv[2])
conn = sqlite3.connect(db, timeout=30, isolation_level=None)
conn.execute("BEGIN EXCLUSIVE")
print("listening locked", flush=True)
time.sleep(seconds)
conn.execute("COMMIT")
conn.close()
