import Common
import Foundation
import HTTPTransport

let client = HTTPClient(userAgent: "spike")
let url = URL(string: CommandLine.arguments[1])!
await run(name: "libcurl (HTTPTransport)") {
    var r = HTTPRequest(.post, url, body: body, timeout: .seconds(10))
    r[header: "Content-Type"] = "application/json"
    return try await client.send(r).status
}
