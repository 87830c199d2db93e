// The abort at a graceful stop (RELIABILITY.md), in 40 lines of C on Debian's OpenSSL 3.0: threads that used
// libcrypto end while the process exits. OpenSSL's clean-up at exit (OPENSSL_cleanup -> ossl_cleanup_thread) frees
// every thread's list of stop handlers without the lock an ending thread takes to free its own, so one 32-byte block
// is freed twice: glibc's "double free or corruption (fasttop)", sometimes a segfault. With OPENSSL_INIT_NO_ATEXIT
// (what `LibCrypto.skipCleanupAtExit()` asks for first thing in the relay's main) the clean-up is not registered.
//   cc -O2 Tests/Sanitizers/openssl-exit-race.c -o /tmp/race -lcrypto -lpthread
//   for i in $(seq 1500); do /tmp/race || echo died; done 2>/dev/null | grep -c died            # about 3% here
//   for i in $(seq 1500); do /tmp/race no-atexit || echo died; done 2>/dev/null | grep -c died  # 0
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <pthread.h>
#include <string.h>

enum { THREADS = 16 };
static pthread_barrier_t barrier;

static void *worker(void *unused) {
    unsigned char mac[EVP_MAX_MD_SIZE];
    unsigned int length = 0;
    // What the relay thread does for a signed webhook: libcrypto registers this thread's stop handlers.
    HMAC(EVP_sha256(), "key", 3, (const unsigned char *)"message", 7, mac, &length);
    pthread_barrier_wait(&barrier);
    return unused;  // the thread ends: its key destructor frees its handler list, while main exits
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "no-atexit") == 0) OPENSSL_init_crypto(OPENSSL_INIT_NO_ATEXIT, NULL);
    pthread_barrier_init(&barrier, NULL, THREADS + 1);
    for (int i = 0; i < THREADS; i++) {
        pthread_t thread;
        pthread_create(&thread, NULL, worker, NULL);
        pthread_detach(thread);
    }
    pthread_barrier_wait(&barrier);
    return 0;  // exit(): the atexit handlers, OpenSSL's clean-up among them, as the threads end
}
