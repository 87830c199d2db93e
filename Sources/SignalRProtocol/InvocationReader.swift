extension JSONHubProtocol {
    /// One pass over a plain invocation (type 1, without invocation id, stream ids or headers) whose target comes
    /// before its arguments, as servers write it: `arguments` reads the arguments array of that target into a
    /// value. The target is lent as its bytes (plain ASCII, as servers write method names), without a String made for
    /// it. nil when the message is anything else or in another form, or `arguments` gives nil: then `decode` is the
    /// way (the same message decoded there gives the same result or the exact error).
    /// Inlinable: specialized in the caller's module for its `T` rather than looking up `T?`'s metadata per message.
    @inlinable
    public static func decodeInvocation<T>(
        _ bytes: UnsafeBufferPointer<UInt8>,
        _ arguments: (_ target: UnsafeBufferPointer<UInt8>, _ reader: inout JSONReader) -> T?
    ) -> T? {
        JSONReader.read(bytes) { r -> T? in
            guard r.enterObject() else { return nil }
            var isInvocation: Bool?
            var target: UnsafeBufferPointer<UInt8>?
            var result: T?
            while let key = r.nextKey() {
                switch key {
                case "type":
                    guard isInvocation == nil, let one = r.number({ $0.spells("1") }) else { return nil }
                    isInvocation = one
                case "target":
                    guard target == nil, let t = r.asciiString({ $0 }) else { return nil }
                    target = t
                case "arguments":
                    guard result == nil, let target, let value = arguments(target, &r), !r.failed else { return nil }
                    result = value
                case "invocationId", "streamIds", "headers":
                    return nil
                default:
                    guard r.skipValue() else { return nil }
                }
            }
            guard !r.failed, r.atEnd(), isInvocation == true else { return nil }
            return result
        }
    }
}
