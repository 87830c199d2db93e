// The idle-memory floor of the relay's stack: a Swift program that loads the C libraries the relay links and uses
// Foundation as the relay does at start (a URL, the environment, the file system, the clock), then sleeps. It
// connects to nothing and holds nothing.
//
//   swiftc -O rss_foundation.swift && ./rss_foundation     prints "connected" (for the harness), then sleeps
import Foundation

for library in ["libwebsockets.so.17", "libsqlite3.so.0", "libcurl.so.4", "libcrypto.so.3", "libmosquitto.so.1"] {
    guard dlopen(library, RTLD_NOW) != nil else { fatalError("cannot load \(library)") }
}
let url = URL(string: "http://127.0.0.1:5000/hubs/family")
let home = ProcessInfo.processInfo.environment["HOME"]
let exists = FileManager.default.fileExists(atPath: "/tmp")
let now = Date().timeIntervalSince1970
print(url?.host == nil || home == nil || !exists || now < 0 ? "connected?" : "connected")
fflush(stdout)
while true { sleep(3600) }
