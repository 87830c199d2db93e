import Foundation
import SignalRClient
import Synchronization

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// URLSession for webhooks, with redirects refused: a 3xx is reported as it came (a webhook that moved must be
/// reconfigured, and following it could send a signed alert somewhere unintended). Delegate-based tasks, because
/// on Linux a completion-handler task always follows redirects.
final class HTTPClient: NSObject, URLSessionDataDelegate, @unchecked Sendable {
    // @unchecked: `session` is set once in init; `tasks` is behind its Mutex.
    private var session: URLSession!
    private let tasks = Mutex<[Int: (data: Data, done: CheckedContinuation<(Data, HTTPURLResponse), any Error>)]>([:])

    static let shared = HTTPClient()

    override init() {
        super.init()
        let config = URLSessionConfiguration.ephemeral
        config.httpCookieStorage = nil
        config.urlCache = nil
        session = URLSession(configuration: config, delegate: self, delegateQueue: nil)
    }

    /// Cancelling the calling task cancels the request (a stop must not wait for a slow destination), and so does
    /// the request's timeout (`withDeadline`: URLSession alone does not end a silent request on Linux).
    func send(_ request: URLRequest) async throws -> (Data, HTTPURLResponse) {
        try await withDeadline(request.deadline) { try await self.start(request) }
    }

    private func start(_ request: URLRequest) async throws -> (Data, HTTPURLResponse) {
        let task = session.dataTask(with: request)
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                tasks.withLock { $0[task.taskIdentifier] = (Data(), continuation) }
                task.resume()
                if Task.isCancelled { task.cancel() }
            }
        } onCancel: {
            task.cancel()
        }
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        tasks.withLock { $0[dataTask.taskIdentifier]?.data.append(data) }
    }

    func urlSession(
        _ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse, newRequest request: URLRequest,
        completionHandler: @escaping @Sendable (URLRequest?) -> Void
    ) {
        completionHandler(nil)
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        guard let entry = tasks.withLock({ $0.removeValue(forKey: task.taskIdentifier) }) else { return }
        if let error {
            entry.done.resume(throwing: error)
        } else if let response = task.response as? HTTPURLResponse {
            entry.done.resume(returning: (entry.data, response))
        } else {
            entry.done.resume(throwing: URLError(.badServerResponse))
        }
    }
}
