import Foundation
import HTTPTransport
import TestSupport
import Testing

/// The one HTTP client against a real server on loopback (TestSupport's receiver).
@Suite struct HTTPClientTests {
    @Test func aPostArrivesWithItsBodyAndTheAnswerComesBack() async throws {
        let server = WebhookReceiver { request, _ in
            .init(201, headers: ["X-Seen": "\(request.body.count)"], body: "made \(request.path)")
        }
        try await server.run { base in
            var request = HTTPRequest(.post, base.appending(path: "things"), body: Array(#"{"a":1}"#.utf8))
            request[header: "Content-Type"] = "application/json"
            let answer = try await HTTPClient.shared.send(request)
            #expect(answer.status == 201)
            #expect(answer.headers.first { $0.name.lowercased() == "x-seen" }?.value == "7")
            #expect(String(decoding: answer.body, as: UTF8.self) == "made /things")
            #expect(server.received.count == 1)
            #expect(server.received.first?.method == "POST" && server.received.first?.text == #"{"a":1}"#)
            #expect(server.received.first?.headers["content-type"] == "application/json")
        }
    }

    /// A header value with a line break is not sent: it would add headers of its own to the request.
    @Test func aHeaderWithALineBreakIsNotSent() async throws {
        let api = WebhookReceiver()
        try await api.run { base in
            var request = HTTPRequest(.get, base.appending(path: "x"))
            request[header: "X-Token"] = "abc\r\nX-Injected: 1"
            do throws(HTTPError) {
                _ = try await HTTPClient.shared.send(request)
                Issue.record("sent")
            } catch {
                #expect(error.kind == .invalidRequest, "\(error)")
            }
            #expect(api.received.isEmpty)
        }
    }

    @Test func anAnswerOverTheLimitIsTooLarge() async throws {
        let server = WebhookReceiver { _, _ in .init(200, body: String(repeating: "x", count: 10_000)) }
        try await server.run { base in
            do throws(HTTPError) {
                _ = try await HTTPClient.shared.send(
                    HTTPRequest(.get, base.appending(path: "big"), maxResponseBytes: 1_000))
                Issue.record("10,000 bytes read with a limit of 1,000")
            } catch {
                #expect(error.kind == .tooLarge, "\(error)")
            }
        }
    }

    @Test func aSilentServerTimesOut() async throws {
        let server = WebhookReceiver { _, _ in .init(200, delay: .seconds(5)) }
        try await server.run { base in
            do throws(HTTPError) {
                _ = try await HTTPClient.shared.send(
                    HTTPRequest(.get, base.appending(path: "slow"), timeout: .milliseconds(300)))
                Issue.record("answered")
            } catch {
                #expect(error.kind == .timedOut, "\(error)")
            }
        }
    }

    /// The one classification of answers that the REST client and the sinks share.
    @Test func everyStatusHasOneClass() {
        #expect([200, 201, 204, 299].allSatisfy { AnswerClass(status: $0) == .success })
        #expect(AnswerClass(status: 429) == .throttled)
        #expect([408, 500, 502, 503, 599].allSatisfy { AnswerClass(status: $0) == .transient })
        #expect([301, 302, 307, 308].allSatisfy { AnswerClass(status: $0) == .redirect })
        #expect(AnswerClass(status: 410) == .gone)
        #expect([400, 401, 403, 404, 409, 413, 422].allSatisfy { AnswerClass(status: $0) == .refused })
        #expect([429, 408, 503].allSatisfy { AnswerClass(status: $0).mayRetry })
        #expect(![200, 302, 400, 410].contains { AnswerClass(status: $0).mayRetry })
    }
}
