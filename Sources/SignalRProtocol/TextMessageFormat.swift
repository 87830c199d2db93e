import Foundation

/// The text transfer format: every message ends with the record separator 0x1E.
public enum TextMessageFormat {
    public static let recordSeparator: UInt8 = 0x1E

    /// Splits one complete WebSocket message into hub messages. A trailing piece without 0x1E cannot be
    /// finished by a later frame (a WebSocket message is whole), so it is reported, after the good ones.
    public static func split(_ bytes: some Collection<UInt8>) -> (messages: [ArraySlice<UInt8>], incomplete: Bool) {
        let array = Array(bytes)
        var messages: [ArraySlice<UInt8>] = []
        var start = 0
        // memchr: a frame of 20 messages is about 6 KB, and a loop over its bytes was 4% of the client's CPU.
        array.withUnsafeBufferPointer { b in
            guard let base = b.baseAddress else { return }
            while start < b.count, let hit = memchr(base + start, Int32(recordSeparator), b.count - start) {
                let end = base.distance(to: hit.assumingMemoryBound(to: UInt8.self))
                messages.append(array[start..<end])
                start = end + 1
            }
        }
        return (messages, start < array.count || array.isEmpty)
    }

    /// The official parser's contract: all messages, or "Message is incomplete." if anything is left over.
    public static func parse(_ bytes: some Collection<UInt8>) throws(HubProtocolError) -> [ArraySlice<UInt8>] {
        let (messages, incomplete) = split(bytes)
        if incomplete { throw HubProtocolError("Message is incomplete.") }
        return messages
    }

    public static func frame(_ json: some Collection<UInt8>) -> [UInt8] {
        var out = Array(json)
        out.append(recordSeparator)
        return out
    }
}
