// The floor for the whole relay: the rows the relay writes for each hub event, written directly in C on the same
// libraries (libwebsockets, SQLite; libcurl for the webhooks) into a copy of the relay's own database (its schema,
// its indexes, its seeded family). What it keeps of the relay's promise: every event lands once, each transaction as
// its row in `txn` (a repeat found by its id there, as the relay's since session 41), each BalanceUpdated in the
// inbox with its normalised payload (a database of schema v21 or before, for a before-and-after beside an older relay:
// each event in the inbox under the relay's dedup key then, a transaction's with an empty payload; from schema v24, not
// one right behind its stored transaction with that transaction's balance after, which the relay leaves to that
// row), each child's balance (from schema v27 written only when it does not follow the batch's transaction, as the
// relay's: the child's row says once that its balance follows its newest transaction), and for each
// transaction one delivery row with its alert's JSON (the bench's one rule). A batch is committed durably (WAL,
// synchronous=FULL, the relay's page cache and checkpoint size) once the socket has nothing more waiting, or at
// 1,000 events: what came in while the last commit ran, as the relay's writer takes it (in a blast the relay
// commits 600-1,900 events at a time; committing after every read instead gave the floor 20 events a commit and
// 20,000 events/s, less than the relay). A TransactionCreated that ends a read is held up to 2 ms for the
// BalanceUpdated the backend sends right behind it, as the relay's decoder holds it: one commit per transaction.
// With WEBHOOK_URL (the soak), each batch's alerts are then POSTed as Standard Webhooks JSON over one kept-alive
// libcurl handle, and each delivery row is marked delivered with the next batch's commit (a crash resends only that
// batch's webhooks). What it leaves out: a parser (it finds each field by searching the text, and trusts it),
// money checks, local writes awaiting confirmation, rules, templates, signing, retries, logging, a second thread.
//
//   store_floor HOST PORT PATH DB [WEBHOOK_URL]
// Prints "connected" once the handshake is answered, then runs until SIGTERM.
#define _GNU_SOURCE  // memmem
#include <ctype.h>
#include <curl/curl.h>
#include <sys/ioctl.h>
#include <sys/time.h>
#include <time.h>

#include "floor_link.h"
#include "floor_sqlite.h"

static int connected, in_batch, batch_events, awaiting_balance;
static lws_sorted_usec_list_t hold_timer;
static sqlite3_stmt *begin_stmt, *commit_stmt, *insert_inbox, *balance_inbox, *is_stored, *insert_txn, *insert_delivery, *latest_balance,
    *load_child, *save_child, *mark_delivered;
static char now_iso[32];
static int keyed_inbox;  // schema v21 or before: every event in the inbox under a unique dedup key
static int balance_in_transaction;  // schema v24 or later: see balance_updated
static int numbered_deliveries;  // schema v25 or later: a delivery row under its id's first 64 bits, no index of ids
static int followed_balances;  // schema v27 or later: a child's balance can follow its newest transaction
// The transaction stored (or found stored) by the event just before, in this batch: its child and balance after.
static struct { char child_id[40]; long long after; int set; } just_stored;
static unsigned long long balance_updates, events, commits, rng = 0x9e3779b97f4a7c15ULL;
static lws_usec_t held_since;

// The soak's webhooks: a batch's alerts, sent after its commit; the rows they went out for, marked with the next.
enum { MAX_PENDING = 4096 };
static CURL *curl;
static struct { char id[48]; char *body; } pending[MAX_PENDING];
static char sent[MAX_PENDING][48];
static int pending_count, sent_count;

// The children a batch touched: loaded once, written once at its commit (not at all when the balance is the one the
// batch's transaction left and the row already follows it). `follows`: the row says so; `stored`: the batch stored a
// transaction of the child, which left `stored_after`.
enum { MAX_CHILDREN = 64 };
static struct child {
    char id[37]; char name[64]; long long balance, stored_after; int changed, follows, stored;
} children[MAX_CHILDREN];
static int child_count;

static void text(sqlite3_stmt *s, int i, const char *t) { sqlite3_bind_text(s, i, t, -1, SQLITE_STATIC); }

static size_t discard(char *p, size_t size, size_t n, void *u) { (void)p; (void)u; return size * n; }

// A string member's value (no escapes in the simulator's text), lowercased when asked; NULL when absent.
static const char *string_member(const char *m, size_t len, const char *key, char *out, size_t cap, int lower) {
    const char *p = memmem(m, len, key, strlen(key));
    if (!p) return NULL;
    p += strlen(key);
    size_t n = 0;
    while (p < m + len && *p != '"' && n + 1 < cap) out[n++] = lower ? (char)tolower((unsigned char)*p++) : *p++;
    out[n] = 0;
    return out;
}

// A number in minor units (two decimals at most: the simulator's money).
static long long cents_at(const char *p) {
    int negative = *p == '-';
    if (negative) p++;
    long long whole = 0, fraction = 0;
    while (isdigit((unsigned char)*p)) whole = whole * 10 + (*p++ - '0');
    if (*p == '.') {
        p++;
        for (int i = 0; i < 2; i++) fraction = fraction * 10 + (isdigit((unsigned char)*p) ? *p++ - '0' : 0);
    }
    return (negative ? -1 : 1) * (whole * 100 + fraction);
}

static long long number_member(const char *m, size_t len, const char *key) {
    const char *p = memmem(m, len, key, strlen(key));
    return p ? cents_at(p + strlen(key)) : 0;
}

static void money(char *out, long long c) {
    sprintf(out, "%s%lld.%02lld", c < 0 ? "-" : "", llabs(c) / 100, llabs(c) % 100);
}

static struct child *child_of(const char *id) {
    for (int i = 0; i < child_count; i++)
        if (!strcmp(children[i].id, id)) return &children[i];
    if (child_count == MAX_CHILDREN) return NULL;
    text(load_child, 1, id);
    struct child *c = NULL;
    if (sqlite3_step(load_child) == SQLITE_ROW) {
        c = &children[child_count++];
        strcpy(c->id, id);
        snprintf(c->name, sizeof c->name, "%s", (const char *)sqlite3_column_text(load_child, 1));
        c->balance = sqlite3_column_int64(load_child, 0);
        c->follows = followed_balances && sqlite3_column_int(load_child, 2);
        c->changed = c->stored = 0;
    }
    sqlite3_reset(load_child);
    return c;
}

// A delivery id's first 64 bits (dlv_ xxxxxxxx-xxxx-7xxx): its row id from schema v25, as the relay numbers it.
static long long id_number(const char *id) {
    unsigned long long high, middle, low;
    sscanf(id, "dlv_%8llx-%4llx-%4llx", &high, &middle, &low);
    return (long long)(high << 32 | middle << 16 | low);
}

// The outcomes of the last batch's webhooks, written first in the next transaction, as the relay
// writes them (session 41: before the new rows fill the page the grown rows are on).
static void mark_sent(void) {
    for (int i = 0; i < sent_count; i++) {
        text(mark_delivered, 1, now_iso);
        if (numbered_deliveries)
            sqlite3_bind_int64(mark_delivered, 2, id_number(sent[i]));
        else
            text(mark_delivered, 2, sent[i]);
        step(mark_delivered, "mark delivered");
    }
    sent_count = 0;
}

static void begin_batch(void) {
    struct timeval tv;
    gettimeofday(&tv, NULL);
    struct tm tm;
    gmtime_r(&tv.tv_sec, &tm);
    size_t n = strftime(now_iso, sizeof now_iso, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(now_iso + n, sizeof now_iso - n, ".%03ldZ", (long)(tv.tv_usec / 1000));
    step(begin_stmt, "begin");
    in_batch = 1;
    mark_sent();
}

static void wake(lws_sorted_usec_list_t *sul) { (void)sul; }  // the loop's turn ends, and commit_batch runs

static void send_webhooks(void) {
    for (int i = 0; i < pending_count; i++) {
        char id_header[64], time_header[48];
        snprintf(id_header, sizeof id_header, "webhook-id: %.47s", pending[i].id);
        snprintf(time_header, sizeof time_header, "webhook-timestamp: %lld", (long long)time(NULL));
        struct curl_slist *headers = curl_slist_append(NULL, "Content-Type: application/json");
        headers = curl_slist_append(headers, id_header);
        headers = curl_slist_append(headers, time_header);
        curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
        curl_easy_setopt(curl, CURLOPT_POSTFIELDS, pending[i].body);
        CURLcode rc = curl_easy_perform(curl);
        long status = 0;
        curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
        if (rc == CURLE_OK && status < 300) strcpy(sent[sent_count++], pending[i].id);
        else fprintf(stderr, "store_floor: webhook failed: %s, HTTP %ld\n", curl_easy_strerror(rc), status);
        curl_slist_free_all(headers);
        free(pending[i].body);
    }
    pending_count = 0;
}

// After each turn of the loop: the batch is committed unless more is waiting to be read, or its last event is a
// TransactionCreated whose BalanceUpdated may still come (for 2 ms).
static void commit_batch(void) {
    if (!in_batch) return;
    int waiting = 0;
    if (floor_link && batch_events < 1000 && ioctl(lws_get_socket_fd(floor_link), FIONREAD, &waiting) == 0 && waiting > 0) return;
    if (floor_link && batch_events < 1000 && awaiting_balance) {
        lws_usec_t left = held_since + 2 * LWS_US_PER_MS - lws_now_usecs();
        if (left > 0) {
            lws_sul_schedule(floor_context, 0, &hold_timer, wake, left);
            return;
        }
    }
    if (floor_context) lws_sul_cancel(&hold_timer);
    awaiting_balance = 0;
    for (int i = 0; i < child_count; i++) {
        struct child *c = &children[i];
        if (!c->changed) continue;
        int follows = followed_balances && c->stored && c->balance == c->stored_after;
        if (follows && c->follows) continue;
        sqlite3_bind_int64(save_child, 1, c->balance);
        text(save_child, 2, now_iso);
        text(save_child, 3, c->id);
        if (followed_balances) sqlite3_bind_int(save_child, 4, follows);
        step(save_child, "save child");
    }
    child_count = 0;
    just_stored.set = 0;
    step(commit_stmt, "commit");
    commits++;
    in_batch = 0;
    batch_events = 0;
    send_webhooks();
}

static void transaction_created(const char *m, size_t len) {
    char id[40], child_id[40], type[16] = "", description[256] = "", created_at[40] = "", created_by[128] = "";
    if (!string_member(m, len, "\"id\":\"", id, sizeof id, 1) ||
        !string_member(m, len, "\"childId\":\"", child_id, sizeof child_id, 1)) return;
    const char *args = memmem(m, len, "\"arguments\":", 12);  // the transaction's own "type", not the message's
    if (!args) return;
    size_t rest = len - (size_t)(args - m);
    string_member(args, rest, "\"type\":\"", type, sizeof type, 0);
    string_member(args, rest, "\"description\":\"", description, sizeof description, 0);
    string_member(args, rest, "\"createdAt\":\"", created_at, sizeof created_at, 0);
    string_member(args, rest, "\"createdByName\":\"", created_by, sizeof created_by, 0);
    long long amount = number_member(args, rest, "\"amount\":"), after = number_member(args, rest, "\"balanceAfter\":");
    struct child *child = child_of(child_id);
    if (!child) return;  // the relay catches up here; the blast's children are all known
    char amount_text[32], after_text[32], before_text[32], members[1024], alert[1400];
    money(amount_text, amount);
    money(after_text, after);
    money(before_text, child->balance);
    snprintf(members, sizeof members,
             "\"id\":\"%s\",\"childId\":\"%s\",\"type\":\"%s\",\"amount\":\"%s\",\"description\":\"%s\","
             "\"balanceAfter\":\"%s\",\"createdAt\":\"%s\",\"createdByName\":\"%s\"",
             id, child_id, type, amount_text, description, after_text, created_at, created_by);
    if (keyed_inbox) {
        char key[64];
        snprintf(key, sizeof key, "TransactionCreated:%s", id);
        text(insert_inbox, 1, key);
        text(insert_inbox, 2, "");
        text(insert_inbox, 3, now_iso);
        step(insert_inbox, "insert inbox");
        if (sqlite3_changes(db) != 1) return;  // a duplicate
    } else {
        text(is_stored, 1, id);
        int repeat = sqlite3_step(is_stored) == SQLITE_ROW;
        sqlite3_reset(is_stored);
        strcpy(just_stored.child_id, child_id);
        just_stored.after = after;
        just_stored.set = 1;
        if (repeat) return;
    }
    const char *values[] = {id, child_id, NULL, type, description, NULL, created_at, created_by, now_iso};
    for (int i = 0; i < 9; i++) if (values[i]) text(insert_txn, i + 1, values[i]);
    sqlite3_bind_int64(insert_txn, 3, amount);
    sqlite3_bind_int64(insert_txn, 6, after);
    step(insert_txn, "insert txn");
    // The delivery: a time-ordered id, as the relay's, and the alert the rule's sink is sent.
    struct timeval tv;
    gettimeofday(&tv, NULL);
    unsigned long long ms = (unsigned long long)tv.tv_sec * 1000 + (unsigned long long)tv.tv_usec / 1000;
    rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
    // Within a millisecond the 12 bits after the version count up from a random start, as the relay's ids do.
    static unsigned long long last_ms, count;
    if (ms <= last_ms && last_ms - ms < 1000) {
        if (++count > 0xfff) last_ms++, count = 0;
        ms = last_ms;
    } else {
        last_ms = ms, count = (rng >> 53) & 0x7ff;
    }
    char delivery_id[48];
    snprintf(delivery_id, sizeof delivery_id, "dlv_%08llx-%04llx-7%03llx-%04llx-%012llx", ms >> 16, ms & 0xffff,
             count, 0x8000 | ((rng >> 12) & 0x3fff), (rng >> 26) & 0xffffffffffffULL);
    snprintf(alert, sizeof alert,
             "{\"kind\":\"transaction.created\",\"at\":\"%s\",\"currency\":\"USD\",\"childId\":\"%s\",\"childName\":\"%s\","
             "\"transaction\":{%s},\"balance\":\"%s\",\"previousBalance\":\"%s\",\"caughtUp\":false}",
             now_iso, child_id, child->name, members, after_text, before_text);
    text(insert_delivery, 1, delivery_id);
    if (numbered_deliveries) sqlite3_bind_int64(insert_delivery, 5, id_number(delivery_id));
    text(insert_delivery, 2, child_id);
    text(insert_delivery, 3, alert);
    text(insert_delivery, 4, now_iso);
    step(insert_delivery, "insert delivery");
    child->balance = child->stored_after = after;
    child->changed = child->stored = 1;
    awaiting_balance = 1;
    held_since = lws_now_usecs();
    if (!curl || pending_count == MAX_PENDING) return;
    static const char head[] = "{\"type\":\"transaction.created\",\"timestamp\":\"";
    size_t cap = sizeof head + strlen(now_iso) + strlen(alert) + 16;
    char *body = malloc(cap);
    snprintf(body, cap, "%s%s\",\"data\":%s}", head, now_iso, alert);
    strcpy(pending[pending_count].id, delivery_id);
    pending[pending_count++].body = body;
}

// `follows`: the event before it in this batch stored a transaction (just_stored). From schema v24 the relay keeps
// no inbox row for a balance right behind its transaction with that transaction's balance after: the row says it.
static void balance_updated(const char *m, size_t len, int follows) {
    const char *args = memmem(m, len, "\"arguments\":[\"", 14);
    if (!args) return;
    args += 14;
    char child_id[40];
    size_t n = 0;
    while (args < m + len && *args != '"' && n + 1 < sizeof child_id) child_id[n++] = (char)tolower((unsigned char)*args++);
    child_id[n] = 0;
    const char *comma = memchr(args, ',', (size_t)(m + len - args));
    if (!comma) return;
    long long balance = cents_at(comma + 1);
    struct child *child = child_of(child_id);
    if (!child) return;
    char payload[160], balance_text[32];
    money(balance_text, balance);
    snprintf(payload, sizeof payload, "{\"event\":\"BalanceUpdated\",\"childId\":\"%s\",\"balance\":\"%s\"}", child_id,
             balance_text);
    if (balance_in_transaction && follows && just_stored.after == balance && !strcmp(just_stored.child_id, child_id)) {
        // recorded by the transaction's row
    } else if (keyed_inbox) {
        char key[96];
        snprintf(key, sizeof key, "BalanceUpdated:floor-%llu", ++balance_updates);
        text(balance_inbox, 1, key);
        text(balance_inbox, 2, payload);
        text(balance_inbox, 3, now_iso);
        step(balance_inbox, "insert inbox");
    } else {
        text(insert_inbox, 1, payload);
        text(insert_inbox, 2, now_iso);
        step(insert_inbox, "insert inbox");
    }
    // The relay compares the server's balance with its newest transaction's (a gap means missed events).
    text(latest_balance, 1, child_id);
    check(sqlite3_step(latest_balance), "latest balance");
    sqlite3_reset(latest_balance);
    child->balance = balance;
    child->changed = 1;
    awaiting_balance = 0;
}

static void handle(const char *m, size_t len) {
    if (!connected) {  // the handshake answer
        connected = 1;
        printf("connected\n");
        fflush(stdout);
        return;
    }
    int created = NULL != memmem(m, len, "\"target\":\"TransactionCreated\"", 29);
    if (!created && !memmem(m, len, "\"target\":\"BalanceUpdated\"", 25)) return;  // pings and the rest
    if (!in_batch) begin_batch();
    events++;
    batch_events++;
    int follows = just_stored.set;
    just_stored.set = 0;
    if (created) transaction_created(m, len);
    else balance_updated(m, len, follows);
}

int main(int argc, char **argv) {
    if (argc != 5 && argc != 6) {
        fprintf(stderr, "usage: store_floor HOST PORT PATH DB [WEBHOOK_URL] (DB: a copy of the relay's database)\n");
        return 2;
    }
    floor_name = "store_floor";
    floor_handle = handle;
    check(sqlite3_open(argv[4], &db), "open");
    check(sqlite3_exec(db, "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL; PRAGMA cache_size=-6144;"
                           "PRAGMA wal_autocheckpoint=4000;", NULL, NULL, NULL), "pragmas");
    prepare("BEGIN IMMEDIATE", &begin_stmt);
    prepare("COMMIT", &commit_stmt);
    sqlite3_stmt *columns;
    prepare("SELECT COUNT(*) FROM pragma_table_info('inbox') WHERE name = 'dedup_key'", &columns);
    keyed_inbox = sqlite3_step(columns) == SQLITE_ROW && sqlite3_column_int(columns, 0) == 1;
    sqlite3_finalize(columns);
    prepare("SELECT COUNT(*) FROM grdb_migrations WHERE identifier LIKE 'v24:%'", &columns);
    balance_in_transaction = sqlite3_step(columns) == SQLITE_ROW && sqlite3_column_int(columns, 0) == 1;
    sqlite3_finalize(columns);
    prepare("SELECT COUNT(*) FROM pragma_table_info('delivery') WHERE name = 'id_number'", &columns);
    numbered_deliveries = sqlite3_step(columns) == SQLITE_ROW && sqlite3_column_int(columns, 0) == 1;
    sqlite3_finalize(columns);
    if (keyed_inbox) {
        prepare("INSERT OR IGNORE INTO inbox (dedup_key, kind, payload, caught_up, received_at)"
                " VALUES (?, 'TransactionCreated', ?, 0, ?)", &insert_inbox);
        prepare("INSERT OR IGNORE INTO inbox (dedup_key, kind, payload, caught_up, received_at)"
                " VALUES (?, 'BalanceUpdated', ?, 0, ?)", &balance_inbox);
    } else {
        prepare("INSERT INTO inbox (kind, payload, received_at) VALUES ('BalanceUpdated', ?, ?)", &insert_inbox);
        prepare("SELECT 1 FROM txn WHERE id = ?", &is_stored);
    }
    prepare("INSERT INTO txn (id, child_id, amount_minor, type, description, balance_after_minor, created_at, created_by,"
            " origin, received_via, stored_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'server', 'hub', ?)"
            " ON CONFLICT(id) DO UPDATE SET origin = excluded.origin, balance_after_minor = excluded.balance_after_minor",
            &insert_txn);
    if (numbered_deliveries)
        prepare("INSERT INTO delivery (id_number, id, sink, rule, kind, child_id, urgency, alert, digest, dedup_key, state,"
                " next_attempt_at, last_error, created_at, trace_parent)"
                " VALUES (?5, ?1, 'hook', 'rule 1', 'transaction.created', ?2, 'normal', ?3, 0, NULL, 'pending', ?4, NULL,"
                " ?4, NULL)",
                &insert_delivery);
    else
        prepare("INSERT INTO delivery (id, sink, rule, kind, child_id, urgency, alert, digest, dedup_key, state,"
                " next_attempt_at, last_error, created_at, trace_parent)"
                " VALUES (?1, 'hook', 'rule 1', 'transaction.created', ?2, 'normal', ?3, 0, NULL, 'pending', ?4, NULL,"
                " ?4, NULL)",
                &insert_delivery);
    prepare("SELECT balance_after_minor FROM txn WHERE child_id = ? AND origin = 'server'"
            " ORDER BY created_at DESC, rowid DESC LIMIT 1", &latest_balance);
    prepare("SELECT COUNT(*) FROM pragma_table_info('child') WHERE name = 'balance_follows'", &columns);
    followed_balances = sqlite3_step(columns) == SQLITE_ROW && sqlite3_column_int(columns, 0) == 1;
    sqlite3_finalize(columns);
    if (followed_balances) {  // the relay's balanceSQL, without the local writes (none here)
        prepare("SELECT CASE WHEN balance_follows THEN coalesce((SELECT n.balance_after_minor FROM txn n"
                " WHERE n.child_id = child.id AND n.origin = 'server' ORDER BY n.created_at DESC, n.rowid DESC LIMIT 1),"
                " balance_minor) ELSE balance_minor END, first_name, balance_follows FROM child WHERE id = ?",
                &load_child);
        prepare("UPDATE child SET balance_minor = ?1, updated_at = ?2, balance_follows = ?4 WHERE id = ?3", &save_child);
    } else {
        prepare("SELECT balance_minor, first_name FROM child WHERE id = ?", &load_child);
        prepare("UPDATE child SET balance_minor = ?, updated_at = ? WHERE id = ?", &save_child);
    }
    prepare(numbered_deliveries
                ? "UPDATE delivery SET state = 'delivered', attempts = attempts + 1, last_error = NULL, delivered_at = ?"
                  " WHERE id_number = ?"
                : "UPDATE delivery SET state = 'delivered', attempts = attempts + 1, last_error = NULL, delivered_at = ?"
                  " WHERE id = ?",
            &mark_delivered);
    if (argc == 6) {
        curl_global_init(CURL_GLOBAL_DEFAULT);
        curl = curl_easy_init();
        curl_easy_setopt(curl, CURLOPT_URL, argv[5]);
        curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, discard);
        curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, 5000L);
        curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    }

    struct lws_context *context = floor_connect(argv[1], argv[2], argv[3], floor_callback);
    if (!context) return 1;
    floor_run(context, commit_batch);
    commit_batch();  // what came before the signal
    if (sent_count) {  // and the last batch's outcomes
        begin_batch();
        mark_sent();
        step(commit_stmt, "commit");
    }
    fprintf(stderr, "store_floor: %llu events in %llu commits\n", events, commits);
    return 0;
}
