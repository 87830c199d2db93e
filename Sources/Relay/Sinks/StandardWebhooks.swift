import Crypto
import Foundation

/// Standard Webhooks signing (spec v1): HMAC-SHA256 over `{id}.{timestamp}.{body}` with the base64-decoded
/// bytes of a `whsec_` secret; `v1,<base64>` per secret, space-separated during a rotation.
public enum StandardWebhooks {
    public static func signature(id: String, timestamp: Int, body: [UInt8], secrets: [String]) -> String {
        secrets.compactMap { secret -> String? in
            guard let key = Data(base64Encoded: String(secret.hasPrefix("whsec_") ? secret.dropFirst(6) : secret[...])) else { return nil }
            var signed = Array("\(id).\(timestamp).".utf8)
            signed += body
            let mac = HMAC<SHA256>.authenticationCode(for: signed, using: SymmetricKey(data: key))
            return "v1," + Data(mac).base64EncodedString()
        }.joined(separator: " ")
    }
}
