#ifndef CLIBWEBSOCKETS_SHIM_H
#define CLIBWEBSOCKETS_SHIM_H

#include <libwebsockets.h>

// Macros and variadic functions Swift cannot import, wrapped as plain functions.

/// Bytes lws needs in front of every buffer handed to lws_write.
static inline size_t clws_pre(void) { return LWS_PRE; }

/// Routes lws's own log lines to a C callback (a Swift @convention(c) function).
static inline void clws_set_log(int levels, void (*emit)(int level, const char *line)) {
    lws_set_log_level(levels, emit);
}


#endif
