// libFuzzer: a transport message as the MessagePack hub protocol reads it: VarInt length prefixes, then each
// message's array, its values read as JSON values. Whatever the bytes, it returns messages or a thrown
// HubProtocolError; no crash, no hang. Values skipped and read must agree on where a value ends.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzMessagePack(_ data: UnsafeRawPointer, _ count: Int) -> CInt {
    let bytes = Array(UnsafeRawBufferPointer(start: data, count: count))
    if let (pieces, _) = try? BinaryMessageFormat.split(bytes) {
        for piece in pieces {
            if let message = try? MessagePackHubProtocol.decode(piece) {
                // What we decoded must encode again and decode to the same message.
                let again = MessagePackHubProtocol.encode(message)
                let round = (try? BinaryMessageFormat.split(again))?.messages ?? []
                precondition(
                    round.count == 1 && (try? MessagePackHubProtocol.decode(round[0])) == message,
                    "round trip changed the message")
            }
        }
    }
    // The raw reader: a value read whole ends where skipping it ends.
    bytes.withUnsafeBytes { raw in
        var reading = MessagePackReader(raw)
        var skipping = MessagePackReader(raw)
        let value = reading.readValue()
        let skipped = skipping.skip()
        if value != nil {
            precondition(skipped && skipping.position == reading.position, "skip and read disagree on a value's end")
        }
    }
    return 0
}
