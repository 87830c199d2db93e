import CLibCrypto
import Foundation

/// Standard Webhooks signing (spec v1): HMAC-SHA256 over `{id}.{timestamp}.{body}` with the base64-decoded
/// bytes of a `whsec_` secret; `v1,<base64>` per secret, space-separated during a rotation.
public enum StandardWebhooks {
    public static func signature(id: String, timestamp: Int, body: [UInt8], secrets: [String]) -> String {
        secrets.compactMap { secret -> String? in
            guard let key = Data(base64Encoded: String(secret.hasPrefix("whsec_") ? secret.dropFirst(6) : secret[...]))
            else { return nil }
            var signed = Array("\(id).\(timestamp).".utf8)
            signed += body
            return "v1," + Data(hmacSHA256(key: [UInt8](key), message: signed)).base64EncodedString()
        }.joined(separator: " ")
    }

    /// HMAC-SHA256 by OpenSSL's one-shot `HMAC`.
    static func hmacSHA256(key: [UInt8], message: [UInt8]) -> [UInt8] {
        var mac = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var length: UInt32 = 0
        // An empty key (a bare `whsec_`) still needs a pointer: one byte of storage, a length of 0.
        let storage = key.isEmpty ? [0] : key
        let ok = storage.withUnsafeBytes { k in
            message.withUnsafeBytes { m in
                mac.withUnsafeMutableBufferPointer { out in
                    HMAC(
                        EVP_sha256(), k.baseAddress, Int32(key.count),
                        m.baseAddress?.assumingMemoryBound(to: UInt8.self), m.count, out.baseAddress, &length)
                }
            }
        }
        // HMAC fails only without memory; an empty signature would be refused by the receiver, not sent as valid.
        return ok == nil ? [] : Array(mac.prefix(Int(length)))
    }
}
