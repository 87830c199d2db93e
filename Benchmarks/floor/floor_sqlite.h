// What the C floors that store share: one SQLite connection, its statements, and an exit that says what failed
// (named by floor_link.h's `floor_name`, so include that first).
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>

static sqlite3 *db;

static void check(int rc, const char *what) {
    if (rc != SQLITE_OK && rc != SQLITE_DONE && rc != SQLITE_ROW) {
        fprintf(stderr, "%s: %s: %s\n", floor_name, what, sqlite3_errmsg(db));
        exit(1);
    }
}

// Runs a statement that returns no rows, then readies it for the next use.
static void step(sqlite3_stmt *s, const char *what) {
    check(sqlite3_step(s), what);
    sqlite3_reset(s);
}

static void prepare(const char *sql, sqlite3_stmt **s) { check(sqlite3_prepare_v2(db, sql, -1, s, NULL), sql); }
