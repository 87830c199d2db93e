// JSON values are this codec's currency: its users get them with `import SignalRProtocol`.
@_exported import Core
