// The floor for the throughput benchmark: a libwebsockets client that does the SignalR handshake and then only
// counts record separators (0x1E) in what it reads. No JSON, no handlers, no allocation per message: what
// reading the socket costs on this machine, through the same library our client uses.
//
//   lws_floor HOST PORT PATH COUNT     e.g. lws_floor 127.0.0.1 5080 "/hubs/family?access_token=t" 100000
// Prints "connected" once the handshake is answered, then {"events":N,"seconds":S} (first to last message),
// and stays connected (for the RSS reading) until killed.
#include <libwebsockets.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static long target;
static long seen = -1;  // the handshake answer ends with a separator too
static double first, last;
static int reported, interrupted;

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int callback(struct lws *wsi, enum lws_callback_reasons reason, void *user, void *in, size_t len) {
    static const char handshake[] = "{\"protocol\":\"json\",\"version\":1}\x1e";
    switch (reason) {
    case LWS_CALLBACK_CLIENT_ESTABLISHED:
        lws_callback_on_writable(wsi);
        break;
    case LWS_CALLBACK_CLIENT_WRITEABLE: {
        unsigned char buf[LWS_PRE + sizeof handshake];
        memcpy(buf + LWS_PRE, handshake, sizeof handshake - 1);
        lws_write(wsi, buf + LWS_PRE, sizeof handshake - 1, LWS_WRITE_TEXT);
        break;
    }
    case LWS_CALLBACK_CLIENT_RECEIVE: {
        const char *p = in;
        for (size_t i = 0; i < len; i++) {
            if (p[i] != 0x1e) continue;
            if (seen < 0) {
                seen = 0;
                printf("connected\n");
                fflush(stdout);
                continue;
            }
            if (seen == 0) first = now();
            seen++;
        }
        if (!reported && seen >= target) {
            last = now();
            reported = 1;
            printf("{\"events\":%ld,\"seconds\":%.6f}\n", seen, last - first);
            fflush(stdout);
        }
        break;
    }
    case LWS_CALLBACK_CLIENT_CONNECTION_ERROR:
        fprintf(stderr, "lws_floor: connection error: %s\n", in ? (const char *)in : "?");
        interrupted = 1;
        break;
    case LWS_CALLBACK_CLIENT_CLOSED:
        interrupted = 1;
        break;
    default:
        break;
    }
    return 0;
}

static void stop(int sig) { (void)sig; interrupted = 1; }

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: lws_floor HOST PORT PATH COUNT\n");
        return 2;
    }
    target = atol(argv[4]);
    signal(SIGTERM, stop);
    signal(SIGINT, stop);
    lws_set_log_level(LLL_ERR, NULL);
    static const struct lws_protocols protocols[] = {{"signalr", callback, 0, 65536, 0, NULL, 0}, {NULL, NULL, 0, 0, 0, NULL, 0}};
    struct lws_context_creation_info info;
    memset(&info, 0, sizeof info);
    info.port = CONTEXT_PORT_NO_LISTEN;
    info.protocols = protocols;
    struct lws_context *context = lws_create_context(&info);
    if (!context) return 1;
    struct lws_client_connect_info ci;
    memset(&ci, 0, sizeof ci);
    ci.context = context;
    ci.address = argv[1];
    ci.port = atoi(argv[2]);
    ci.path = argv[3];
    ci.host = argv[1];
    ci.origin = argv[1];
    ci.protocol = NULL;
    if (!lws_client_connect_via_info(&ci)) return 1;
    while (!interrupted && lws_service(context, 0) >= 0) {}
    lws_context_destroy(context);
    return 0;
}
