// libFuzzer: a WebSocket message as the hub protocol reads it: record-separator framing, then each record as a hub
// message. Whatever the bytes, it returns a message or a thrown HubProtocolError; no crash, no hang.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzHub(_ data: UnsafeRawPointer, _ count: Int) -> CInt {
    let bytes = Array(UnsafeRawBufferPointer(start: data, count: count))
    let (pieces, _) = TextMessageFormat.split(bytes)
    for piece in pieces {
        if let message = try? JSONHubProtocol.decode(piece) {
            // What we decoded must encode again and decode to the same message.
            let again = JSONHubProtocol.encode(message)
            let (round, _) = TextMessageFormat.split(again)
            precondition(
                round.count == 1 && (try? JSONHubProtocol.decode(round[0])) == message, "round trip changed the message"
            )
        }
    }
    return 0
}
