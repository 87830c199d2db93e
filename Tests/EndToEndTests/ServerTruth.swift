import Foundation
import TestSupport

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The simulator's state as the end-to-end tests' oracle reads it: plain HTTP and Foundation's JSONDecoder, never the
/// relay's REST client, whose bug would otherwise agree with itself (a transaction it cannot read would be missing
/// from both sides of the comparison).
enum ServerTruth {
    struct Child: Decodable {
        let id: UUID
        let firstName: String
        let currentBalance: Decimal
    }

    struct Transaction: Decodable {
        let id: UUID
        let childId: UUID
        let amount: Decimal
        let description: String
        let balanceAfter: Decimal
        let createdAt: Date
    }

    static func children(_ base: URL, token: String = "e2e-token") async throws -> [Child] {
        try await get(base, "api/v1/children", token: token)
    }

    /// Every transaction the server holds: all pages of every child.
    static func transactions(_ base: URL, token: String = "e2e-token") async throws -> [Transaction] {
        var all: [Transaction] = []
        for c in try await children(base, token: token) {
            var offset = 0
            while true {
                let page: [Transaction] = try await get(
                    base, "api/v1/children/\(c.id.uuidString.lowercased())/transactions?limit=500&offset=\(offset)",
                    token: token)
                all += page
                if page.count < 500 { break }
                offset += 500
            }
        }
        return all
    }

    private static func get<T: Decodable>(_ base: URL, _ path: String, token: String) async throws -> T {
        var request = URLRequest(url: URL(string: base.absoluteString + "/" + path)!)
        request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization")
        let (data, response) = try await TestHTTP.data(for: request)
        guard let status = (response as? HTTPURLResponse)?.statusCode, status == 200 else {
            throw HarnessError("GET /\(path): HTTP \((response as? HTTPURLResponse)?.statusCode ?? 0)")
        }
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .custom { decoder in
            let text = try decoder.singleValueContainer().decode(String.self)
            guard let date = try? Date.ISO8601FormatStyle(includingFractionalSeconds: true).parse(text) else {
                throw HarnessError("not an ISO 8601 time with milliseconds: \(text)")
            }
            return date
        }
        return try decoder.decode(T.self, from: data)
    }
}
