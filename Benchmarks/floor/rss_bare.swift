// rss_foundation.swift without Foundation: the Swift runtime and standard library with the same C libraries loaded.
//
//   swiftc -O rss_bare.swift && ./rss_bare     prints "connected" (for the harness), then sleeps
import Glibc

for library in ["libwebsockets.so.17", "libsqlite3.so.0", "libcurl.so.4", "libcrypto.so.3", "libmosquitto.so.1"] {
    guard dlopen(library, RTLD_NOW) != nil else { fatalError("cannot load \(library)") }
}
print("connected")
fflush(stdout)
while true { sleep(3600) }
