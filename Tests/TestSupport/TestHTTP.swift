import Foundation
import HTTPTransport

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The tests' HTTP calls to the simulator and the relay, on the project's libcurl client, with URLSession's shape.
/// Not URLSession: on Linux it watches each socket with a libdispatch source, and that churn of sources, many tests
/// at once, meets a use-after-free in libdispatch's epoll bookkeeping (swift-corelibs-libdispatch#949) that crashed
/// a CI run in `_dispatch_event_loop_drain`.
public enum TestHTTP {
    public static func data(for request: URLRequest) async throws -> (Data, URLResponse) {
        guard let url = request.url, let method = HTTPRequest.Method(rawValue: request.httpMethod ?? "GET") else {
            throw HarnessError("TestHTTP: a request without a URL or with an unknown method")
        }
        var sent = HTTPRequest(
            method, url, body: request.httpBody.map { [UInt8]($0) } ?? [], timeout: .seconds(request.timeoutInterval),
            maxResponseBytes: 64 << 20)
        for (name, value) in request.allHTTPHeaderFields ?? [:] { sent[header: name] = value }
        // Closed afterwards: a kept-alive connection would hold a stopped simulator's port, which a test may take
        // again for a second one (a server reset).
        sent.freshConnection = true
        let answer = try await HTTPClient.shared.send(sent)
        var fields: [String: String] = [:]
        for (name, value) in answer.headers { fields[name] = value }
        let response = HTTPURLResponse(
            url: url, statusCode: answer.status, httpVersion: "HTTP/1.1", headerFields: fields)!
        return (Data(answer.body), response)
    }

    public static func data(from url: URL) async throws -> (Data, URLResponse) {
        try await data(for: URLRequest(url: url))
    }
}
