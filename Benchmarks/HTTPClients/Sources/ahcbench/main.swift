import AsyncHTTPClient
import Common
import Foundation
import NIOCore

let client = HTTPClient(eventLoopGroupProvider: .singleton)
let url = CommandLine.arguments[1]
await run(name: "AsyncHTTPClient") {
    var r = HTTPClientRequest(url: url)
    r.method = .POST
    r.headers.add(name: "Content-Type", value: "application/json")
    r.headers.add(name: "User-Agent", value: "spike")
    r.body = .bytes(ByteBuffer(bytes: body))
    let resp = try await client.execute(r, timeout: .seconds(10))
    _ = try await resp.body.collect(upTo: 1 << 20)
    return Int(resp.status.code)
}
try? await client.shutdown()
