// libFuzzer: the server's handshake answer at the front of the first frame, and a client's handshake request.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzHandshake(_ data: UnsafeRawPointer, _ count: Int) -> CInt {
    let bytes = Array(UnsafeRawBufferPointer(start: data, count: count))
    _ = try? Handshake.decodeResponse(bytes)
    _ = try? Handshake.decodeRequest(bytes)
    return 0
}
