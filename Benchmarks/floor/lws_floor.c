// The floor for the throughput benchmark: a libwebsockets client that does the SignalR handshake and then only
// counts record separators (0x1E) in what it reads. No JSON, no handlers, no allocation per message: what
// reading the socket costs on this machine, through the same library our client uses.
//
//   lws_floor HOST PORT PATH COUNT     e.g. lws_floor 127.0.0.1 5080 "/hubs/family?access_token=t" 100000
// Prints "connected" once the handshake is answered, then {"events":N,"seconds":S} (first to last message),
// and stays connected (for the RSS reading) until killed.
#include <time.h>

#include "floor_link.h"

static long target;
static long seen = -1;  // the handshake answer ends with a separator too
static double first, last;
static int reported;

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int callback(struct lws *wsi, enum lws_callback_reasons reason, void *user, void *in, size_t len) {
    switch (reason) {
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
    default:  // the handshake, the pings and the link's end, as every floor
        return floor_callback(wsi, reason, user, in, len);
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: lws_floor HOST PORT PATH COUNT\n");
        return 2;
    }
    floor_name = "lws_floor";
    target = atol(argv[4]);
    struct lws_context *context = floor_connect(argv[1], argv[2], argv[3], callback);
    if (!context) return 1;
    floor_run(context, NULL);
    return 0;
}
