// The floor for the soak: the least work that keeps the relay's promise for one transaction, written directly in C
// on the same three libraries the relay uses. It reads the hub (libwebsockets, SignalR JSON handshake, a ping every
// 15 s), keeps each burst of hub messages in one SQLite transaction, and commits it durably (WAL,
// synchronous=FULL). A burst ends with a BalanceUpdated (the simulator sends it after its TransactionCreated), or
// 2 ms after its first message, the same window the relay uses. (The timer is a fallback only: libwebsockets 4.1
// polls with a timeout in whole milliseconds, and so it spins through the last one while a timer is due.)
// For each TransactionCreated in the burst, it then POSTs one webhook over a kept-alive libcurl handle. The
// outcomes of those sends are written with the next burst's commit. That is the cheapest safe choice: a crash
// only resends that burst's webhooks. It has no rules, no templates, no signing, no second thread, no logging
// and no parser: it finds the target and the argument by searching the text.
//
//   soak_floor HOST PORT PATH DB WEBHOOK_URL
// Prints "connected" once the handshake is answered, then runs until SIGTERM.
#define _GNU_SOURCE  // memmem
#include <curl/curl.h>

#include "floor_link.h"
#include "floor_sqlite.h"

static int connected;
static sqlite3_stmt *begin_stmt, *commit_stmt, *insert_event, *insert_delivery, *mark_delivered;
static CURL *curl;
static struct curl_slist *headers;
static lws_sorted_usec_list_t commit_timer;
static int in_burst;

// A burst's webhooks, sent after its commit; their delivery rows are marked with the next commit.
enum { MAX_PENDING = 4096 };
static char *pending_body[MAX_PENDING];
static sqlite3_int64 pending_row[MAX_PENDING], sent_row[MAX_PENDING];
static int pending_count, sent_count;

static size_t discard(char *p, size_t size, size_t n, void *u) { (void)p; (void)u; return size * n; }

static void commit_burst(lws_sorted_usec_list_t *sul) {
    (void)sul;
    lws_sul_cancel(&commit_timer);
    // The previous burst's outcomes ride on this commit.
    for (int i = 0; i < sent_count; i++) {
        sqlite3_bind_int64(mark_delivered, 1, sent_row[i]);
        step(mark_delivered, "mark delivered");
    }
    sent_count = 0;
    step(commit_stmt, "commit");
    in_burst = 0;
    for (int i = 0; i < pending_count; i++) {
        curl_easy_setopt(curl, CURLOPT_POSTFIELDS, pending_body[i]);
        CURLcode rc = curl_easy_perform(curl);
        long status = 0;
        curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
        if (rc == CURLE_OK && status < 300) sent_row[sent_count++] = pending_row[i];
        else fprintf(stderr, "soak_floor: webhook failed: %s, HTTP %ld\n", curl_easy_strerror(rc), status);
        free(pending_body[i]);
    }
    pending_count = 0;
}

static const char *contains(const char *m, size_t len, const char *literal) {
    return memmem(m, len, literal, strlen(literal));
}

static void handle(const char *m, size_t len) {
    if (!connected) {  // the handshake answer
        connected = 1;
        printf("connected\n");
        fflush(stdout);
        return;
    }
    int created = NULL != contains(m, len, "\"target\":\"TransactionCreated\"");
    if (!created && !contains(m, len, "\"target\":\"BalanceUpdated\"")) return;  // pings and the rest
    if (!in_burst) {
        step(begin_stmt, "begin");
        in_burst = 1;
        lws_sul_schedule(floor_context, 0, &commit_timer, commit_burst, 2 * LWS_US_PER_MS);
    }
    sqlite3_bind_text(insert_event, 1, m, (int)len, SQLITE_STATIC);
    step(insert_event, "insert event");
    if (!created) {
        commit_burst(NULL);
        return;
    }
    if (pending_count == MAX_PENDING) return;
    // The webhook's data is the transaction object: the text between "arguments":[ and the final ]}.
    const char *args = contains(m, len, "\"arguments\":[");
    const char *end = m + len;
    while (end > m && end[-1] != ']') end--;
    if (!args || end <= args + strlen("\"arguments\":[")) return;
    args += strlen("\"arguments\":[");
    size_t n = (size_t)(end - 1 - args);
    static const char head[] = "{\"type\":\"transaction.created\",\"data\":{\"transaction\":";
    char *body = malloc(sizeof head + n + 2);
    memcpy(body, head, sizeof head - 1);
    memcpy(body + sizeof head - 1, args, n);
    memcpy(body + sizeof head - 1 + n, "}}", 3);
    sqlite3_bind_text(insert_delivery, 1, body, -1, SQLITE_STATIC);
    step(insert_delivery, "insert delivery");
    pending_row[pending_count] = sqlite3_last_insert_rowid(db);
    pending_body[pending_count++] = body;
}

int main(int argc, char **argv) {
    if (argc != 6) {
        fprintf(stderr, "usage: soak_floor HOST PORT PATH DB WEBHOOK_URL\n");
        return 2;
    }
    floor_name = "soak_floor";
    floor_handle = handle;
    check(sqlite3_open(argv[4], &db), "open");
    check(sqlite3_exec(db, "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;"
                           "CREATE TABLE IF NOT EXISTS event(id INTEGER PRIMARY KEY, message TEXT NOT NULL);"
                           "CREATE TABLE IF NOT EXISTS delivery(id INTEGER PRIMARY KEY, body TEXT NOT NULL,"
                           " delivered INTEGER NOT NULL DEFAULT 0);"
                           /* The deliveries still owed, found without a scan; a delivered one leaves it (an index
                              of every row's flag grew with the history: session 54). */
                           "CREATE INDEX IF NOT EXISTS delivery_pending ON delivery(id) WHERE delivered = 0;",
                       NULL, NULL, NULL), "schema");
    prepare("BEGIN IMMEDIATE", &begin_stmt);
    prepare("COMMIT", &commit_stmt);
    prepare("INSERT INTO event(message) VALUES (?)", &insert_event);
    prepare("INSERT INTO delivery(body) VALUES (?)", &insert_delivery);
    prepare("UPDATE delivery SET delivered = 1 WHERE id = ?", &mark_delivered);

    curl_global_init(CURL_GLOBAL_DEFAULT);
    curl = curl_easy_init();
    headers = curl_slist_append(NULL, "Content-Type: application/json");
    curl_easy_setopt(curl, CURLOPT_URL, argv[5]);
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, discard);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, 5000L);
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);

    struct lws_context *context = floor_connect(argv[1], argv[2], argv[3], floor_callback);
    if (!context) return 1;
    floor_run(context, NULL);
    return 0;
}
