#ifndef CLIBWEBSOCKETS_SHIM_H
#define CLIBWEBSOCKETS_SHIM_H

#include <libwebsockets.h>
#include <sys/ioctl.h>

// Macros and variadic functions Swift cannot import, wrapped as plain functions.

/// Bytes lws needs in front of every buffer handed to lws_write.
static inline size_t clws_pre(void) { return LWS_PRE; }

/// Bytes the kernel holds unread on the connection's socket (0 when it cannot tell): more frames are on their way.
static inline int clws_unread_bytes(struct lws *wsi) {
    int n = 0;
    lws_sockfd_type fd = lws_get_socket_fd(wsi);
    if (fd < 0 || ioctl(fd, FIONREAD, &n) != 0) return 0;
    return n;
}

/// Routes lws's own log lines to a C callback (a Swift @convention(c) function).
static inline void clws_set_log(int levels, void (*emit)(int level, const char *line)) {
    lws_set_log_level(levels, emit);
}


#endif
