// libFuzzer: a negotiate response body (the JSON the server answers to POST /negotiate).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzNegotiate(_ data: UnsafeRawPointer, _ count: Int) -> CInt {
    let bytes = Array(UnsafeRawBufferPointer(start: data, count: count))
    _ = try? NegotiateResponse.decode(bytes)
    return 0
}
