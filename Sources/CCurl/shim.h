#ifndef CCURL_SHIM_H
#define CCURL_SHIM_H

#include <curl/curl.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

// curl_easy_setopt and curl_easy_getinfo are variadic, which Swift cannot call: one plain function per argument type.

static inline CURLcode ccurl_set_long(CURL *h, CURLoption o, long v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode ccurl_set_offset(CURL *h, CURLoption o, curl_off_t v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode ccurl_set_pointer(CURL *h, CURLoption o, const void *v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode ccurl_set_string(CURL *h, CURLoption o, const char *v) { return curl_easy_setopt(h, o, v); }

typedef size_t (*ccurl_data_callback)(char *data, size_t size, size_t count, void *context);
static inline CURLcode ccurl_set_callback(CURL *h, CURLoption o, ccurl_data_callback f) { return curl_easy_setopt(h, o, f); }

static inline CURLcode ccurl_get_long(CURL *h, CURLINFO i, long *v) { return curl_easy_getinfo(h, i, v); }
static inline CURLcode ccurl_get_pointer(CURL *h, CURLINFO i, void **v) { return curl_easy_getinfo(h, i, v); }

static inline CURLMcode ccurl_multi_set_long(CURLM *m, CURLMoption o, long v) { return curl_multi_setopt(m, o, v); }

/// The transfer a finished message is about, and how it ended (CURLMsg's union, which Swift sees opaquely).
static inline CURL *ccurl_msg_handle(CURLMsg *m) { return m->easy_handle; }
static inline CURLcode ccurl_msg_result(CURLMsg *m) { return m->data.result; }
static inline int ccurl_msg_is_done(CURLMsg *m) { return m->msg == CURLMSG_DONE; }

/// The one TLS name policy of every transport: the server's name must be in its certificate's subjectAltName, as
/// libwebsockets (and browsers) require. curl alone would still accept a certificate that names the host in its
/// Common Name only. A leaf certificate without subjectAltName fails verification with X509_V_ERR_APPLICATION_
/// VERIFICATION, which the client turns into a message saying how to make one that works.
static int ccurl_verify_subject_alt_name(int preverify_ok, X509_STORE_CTX *ctx) {
    if (!preverify_ok || X509_STORE_CTX_get_error_depth(ctx) != 0) return preverify_ok;
    GENERAL_NAMES *names = X509_get_ext_d2i(X509_STORE_CTX_get_current_cert(ctx), NID_subject_alt_name, NULL, NULL);
    if (names == NULL) {
        X509_STORE_CTX_set_error(ctx, X509_V_ERR_APPLICATION_VERIFICATION);
        return 0;
    }
    GENERAL_NAMES_free(names);
    return 1;
}

static CURLcode ccurl_ssl_context(CURL *curl, void *ssl_ctx, void *unused) {
    (void)curl;
    (void)unused;
    SSL_CTX_set_verify((SSL_CTX *)ssl_ctx, SSL_VERIFY_PEER, ccurl_verify_subject_alt_name);
    return CURLE_OK;
}

static inline CURLcode ccurl_require_subject_alt_name(CURL *h) {
    return curl_easy_setopt(h, CURLOPT_SSL_CTX_FUNCTION, ccurl_ssl_context);
}

#endif
