#ifndef CCURL_SHIM_H
#define CCURL_SHIM_H

#include <curl/curl.h>

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

#endif
