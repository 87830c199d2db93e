// What the C floors share: a libwebsockets client connected to the hub's SignalR endpoint, the end of the link,
// and the loop that services it until SIGTERM or SIGINT. Each floor brings its own callback.
#include <libwebsockets.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static volatile sig_atomic_t floor_interrupted;
static const char *floor_name = "floor";  // for the error lines; each floor sets its own
static struct lws_context *floor_context;
static struct lws *floor_link;  // while the link is open

static void floor_stop(int sig) { (void)sig; floor_interrupted = 1; }

// Connects to ws://HOST:PORT/PATH with `callback`; NULL when libwebsockets cannot start the connection.
static struct lws_context *floor_connect(const char *host, const char *port, const char *path, lws_callback_function *callback) {
    signal(SIGTERM, floor_stop);
    signal(SIGINT, floor_stop);
    lws_set_log_level(LLL_ERR, NULL);
    static struct lws_protocols protocols[2];
    protocols[0] = (struct lws_protocols){"signalr", callback, 0, 65536, 0, NULL, 0};
    struct lws_context_creation_info info;
    memset(&info, 0, sizeof info);
    info.port = CONTEXT_PORT_NO_LISTEN;
    info.protocols = protocols;
    struct lws_context *context = lws_create_context(&info);
    if (!context) return NULL;
    floor_context = context;
    struct lws_client_connect_info ci;
    memset(&ci, 0, sizeof ci);
    ci.context = context;
    ci.address = host;
    ci.port = atoi(port);
    ci.path = path;
    ci.host = host;
    ci.origin = host;
    if (!lws_client_connect_via_info(&ci)) {
        lws_context_destroy(context);
        return NULL;
    }
    return context;
}

// A failed connection (said on stderr) or a closed link ends the floor.
static void floor_on_link_end(enum lws_callback_reasons reason, void *in) {
    if (reason == LWS_CALLBACK_CLIENT_CONNECTION_ERROR) {
        fprintf(stderr, "%s: connection error: %s\n", floor_name, in ? (const char *)in : "?");
        floor_interrupted = 1;
    } else if (reason == LWS_CALLBACK_CLIENT_CLOSED) {
        floor_link = NULL;
        floor_interrupted = 1;
    }
}

// The SignalR handshake, the JSON protocol, sent when the link first becomes writeable.
static const char floor_handshake[] = "{\"protocol\":\"json\",\"version\":1}\x1e";

// Writes `text` (at most 256 bytes: a handshake or a ping) as one text frame.
static inline void floor_send_text(struct lws *wsi, const char *text) {
    unsigned char buf[LWS_PRE + 256];
    size_t n = strlen(text);
    memcpy(buf + LWS_PRE, text, n);
    lws_write(wsi, buf + LWS_PRE, n, LWS_WRITE_TEXT);
}

// For LWS_CALLBACK_CLIENT_RECEIVE: joins a message's fragments, then hands each record of the final one to
// `handle` (without its 0x1e separator).
static inline void floor_receive(struct lws *wsi, const void *in, size_t len, void (*handle)(const char *, size_t)) {
    static char *message;
    static size_t message_len, message_cap;
    if (message_len + len > message_cap) {
        message_cap = (message_len + len) * 2;
        message = realloc(message, message_cap);
    }
    memcpy(message + message_len, in, len);
    message_len += len;
    if (!lws_is_final_fragment(wsi)) return;
    size_t start = 0;
    for (size_t i = 0; i < message_len; i++) {
        if (message[i] != 0x1e) continue;
        handle(message + start, i - start);
        start = i + 1;
    }
    message_len = 0;
}

// The link's writes: the handshake once it opens, then a ping every 15 s, as SignalR's clients send (the hub closes a
// link that has said nothing for 30 s). For a callback's ESTABLISHED and WRITEABLE.
static lws_sorted_usec_list_t floor_ping_timer;
static int floor_handshake_sent, floor_want_ping;

static void floor_ping(lws_sorted_usec_list_t *sul) {
    (void)sul;
    floor_want_ping = 1;
    if (floor_link) lws_callback_on_writable(floor_link);
    lws_sul_schedule(floor_context, 0, &floor_ping_timer, floor_ping, 15 * LWS_US_PER_SEC);
}

static void floor_on_established(struct lws *wsi) {
    floor_link = wsi;
    lws_callback_on_writable(wsi);
    lws_sul_schedule(floor_context, 0, &floor_ping_timer, floor_ping, 15 * LWS_US_PER_SEC);
}

static void floor_on_writeable(struct lws *wsi) {
    if (floor_handshake_sent && !floor_want_ping) return;
    floor_send_text(wsi, floor_handshake_sent ? "{\"type\":6}\x1e" : floor_handshake);
    floor_handshake_sent = 1;
    floor_want_ping = 0;
}

// The callback of a floor that takes whole messages: each record goes to `floor_handle`. A floor that reads the
// frames itself handles LWS_CALLBACK_CLIENT_RECEIVE and passes every other reason here.
static void (*floor_handle)(const char *, size_t);

static int floor_callback(struct lws *wsi, enum lws_callback_reasons reason, void *user, void *in, size_t len) {
    (void)user;
    switch (reason) {
    case LWS_CALLBACK_CLIENT_ESTABLISHED:
        floor_on_established(wsi);
        break;
    case LWS_CALLBACK_CLIENT_WRITEABLE:
        floor_on_writeable(wsi);
        break;
    case LWS_CALLBACK_CLIENT_RECEIVE:
        floor_receive(wsi, in, len, floor_handle);
        break;
    default:
        floor_on_link_end(reason, in);
        break;
    }
    return 0;
}

// Services the link until a signal or its end, then frees the context. `after_turn` (optional) runs after each
// turn of the loop: one poll and whatever it brought.
static void floor_run(struct lws_context *context, void (*after_turn)(void)) {
    while (!floor_interrupted && lws_service(context, 0) >= 0)
        if (after_turn) after_turn();
    floor_link = NULL;
    lws_context_destroy(context);
    floor_context = NULL;
}
