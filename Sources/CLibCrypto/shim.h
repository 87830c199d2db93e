#ifndef CLIBCRYPTO_SHIM_H
#define CLIBCRYPTO_SHIM_H

// OpenSSL's libcrypto, which libcurl (TLS) and libwebsockets already load into the relay: its HMAC-SHA256 signs
// webhooks, so the relay carries no second copy of a crypto library.
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#endif
