import CLibCrypto

/// The process's OpenSSL (libcrypto: the webhook signatures in StandardWebhooks, TLS in libcurl and libwebsockets).
public enum LibCrypto {
    /// Tells OpenSSL not to register its clean-up at exit. Call it first thing in `main`: the process's first init of
    /// OpenSSL decides, and a library may init it at its first use. OpenSSL 3.0's clean-up (`ossl_cleanup_thread`)
    /// frees every thread's list of stop handlers without the lock that an ending thread takes to free its own. So a
    /// thread that used libcrypto and ends while the process exits frees the same 32-byte block a second time:
    /// glibc's "double free or corruption (fasttop)", the abort at a graceful stop in RELIABILITY.md
    /// (`Tests/Sanitizers/openssl-exit-race.c` shows it). The memory goes back to the system with the process.
    public static func skipCleanupAtExit() {
        _ = OPENSSL_init_crypto(UInt64(OPENSSL_INIT_NO_ATEXIT), nil)
    }
}
