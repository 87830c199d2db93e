// swift-tools-version:6.2
// The HTTP client comparison (run.sh; BENCHMARKS.md, "The HTTP client"): not part of the relay's build.
import PackageDescription

let package = Package(
    name: "httpspike",
    platforms: [.macOS(.v15)],
    dependencies: [.package(url: "https://github.com/swift-server/async-http-client.git", from: "1.37.0")],
    targets: [
        .systemLibrary(name: "CCurl", pkgConfig: "libcurl"),
        .target(name: "HTTPTransport", dependencies: ["CCurl"]),
        .target(name: "Common"),
        .executableTarget(name: "curlbench", dependencies: ["HTTPTransport", "Common"]),
        .executableTarget(
            name: "ahcbench", dependencies: ["Common", .product(name: "AsyncHTTPClient", package: "async-http-client")]),
    ]
)
