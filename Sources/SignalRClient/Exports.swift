// The protocol's value types (`JSONValue`, `JSONReader`) are part of this library's API: arguments and results are
// JSON values. A user of the `SignalRClient` product gets them with `import SignalRClient`.
@_exported import SignalRProtocol
