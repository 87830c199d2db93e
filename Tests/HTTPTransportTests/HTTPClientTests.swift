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
    /// The client's thread is an executor: a task there hands its requests over and is resumed with each answer on
    /// the same thread, as the relay's sink workers are; requests from elsewhere share the thread meanwhile.
    @Test func requestsFromTheClientsOwnThreadAreAnsweredThere() async throws {
        let client = HTTPClient(threadName: "test-http")
        let server = WebhookReceiver { request, _ in .init(200, body: request.path) }
        try await server.run { base in
            async let outside = client.send(HTTPRequest(.get, base.appending(path: "outside")))
            let answers = await withTaskExecutorPreference(client.thread) { () async -> [(String, String)] in
                await withTaskGroup(of: (String, String).self) { group in
                    for i in 0..<20 {
                        group.addTask {
                            let answer = try? await client.send(HTTPRequest(.get, base.appending(path: "n\(i)")))
                            return (String(decoding: answer?.body ?? [], as: UTF8.self), ProcessThreads.current())
                        }
                    }
                    return await group.reduce(into: []) { $0.append($1) }
                }
            }
            #expect(Set(answers.map(\.0)) == Set((0..<20).map { "/n\($0)" }))
            #expect(Set(answers.map(\.1)) == ["test-http"])
            let other = try await outside
            #expect(String(decoding: other.body, as: UTF8.self) == "/outside")
            #expect(server.received.count == 21)
        }
    }

    /// With no eventfd (the process had no descriptor left when the client was made), libcurl's own wake-up ends the
    /// thread's idle poll: each request from another thread is taken at once. Were no one to wake it, the first would
    /// wait out that poll's hour, past the time limit.
    @Test(.timeLimit(.minutes(1))) func withoutItsEventfdTheThreadIsStillWokenForEachRequest() async throws {
        let client = HTTPClient(userAgent: "tests", threadName: "test-nofd", wakeUp: .unavailable())
        let server = WebhookReceiver { request, _ in .init(200, body: request.path) }
        try await server.run { base in
            for i in 0..<3 {
                let answer = try await client.send(HTTPRequest(.get, base.appending(path: "n\(i)")))
                #expect(String(decoding: answer.body, as: UTF8.self) == "/n\(i)")
            }
            #expect(server.received.map(\.path) == ["/n0", "/n1", "/n2"])
        }
    }

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
