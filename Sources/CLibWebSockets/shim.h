#ifndef CLIBWEBSOCKETS_SHIM_H
#define CLIBWEBSOCKETS_SHIM_H

#include <libwebsockets.h>
#include <openssl/x509v3.h>
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


/// The one TLS name policy of every transport (see CCurl's shim): a server's leaf certificate without a
/// subjectAltName is refused (1), with X509_V_ERR_APPLICATION_VERIFICATION; anything else is left to OpenSSL (0).
/// For LWS_CALLBACK_OPENSSL_PERFORM_SERVER_CERT_VERIFICATION, whose `user` is the X509_STORE_CTX.
static inline int clws_refuse_without_subject_alt_name(void *x509_ctx) {
    X509_STORE_CTX *ctx = (X509_STORE_CTX *)x509_ctx;
    if (X509_STORE_CTX_get_error_depth(ctx) != 0) return 0;
    GENERAL_NAMES *names = X509_get_ext_d2i(X509_STORE_CTX_get_current_cert(ctx), NID_subject_alt_name, NULL, NULL);
    if (names == NULL) {
        X509_STORE_CTX_set_error(ctx, X509_V_ERR_APPLICATION_VERIFICATION);
        return 1;
    }
    GENERAL_NAMES_free(names);
    return 0;
}

#endif
