// What the C floors share: a libwebsockets client connected to the hub's SignalR endpoint, the end of the link,
// and the loop that services it until SIGTERM or SIGINT. Each floor brings its own callback.
#include <libwebsockets.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static volatile sig_atomic_t floor_interrupted;

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

// For a callback's `default:`: a failed connection (said on stderr) or a closed link ends the floor.
static void floor_on_link_end(const char *name, enum lws_callback_reasons reason, void *in) {
    if (reason == LWS_CALLBACK_CLIENT_CONNECTION_ERROR) {
        fprintf(stderr, "%s: connection error: %s\n", name, in ? (const char *)in : "?");
        floor_interrupted = 1;
    } else if (reason == LWS_CALLBACK_CLIENT_CLOSED) {
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

// Services the link until a signal or its end, then frees the context. `after_turn` (optional) runs after each
// turn of the loop: one poll and whatever it brought.
static void floor_run(struct lws_context *context, void (*after_turn)(void)) {
    while (!floor_interrupted && lws_service(context, 0) >= 0)
        if (after_turn) after_turn();
    lws_context_destroy(context);
}
