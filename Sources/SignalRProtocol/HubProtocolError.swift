/// The SignalRProtocol module's one error: a message that breaks the hub protocol, or an invocation's argument
/// that does not have the type its handler expects (`code` says which). For a protocol fault, `message` is the exact
/// text the official .NET implementation gives for the same input, so logs read the same whichever side found it.
public struct HubProtocolError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Code: Sendable, Equatable {
        /// A message, a handshake or a negotiate answer that breaks the protocol.
        case invalidMessage
        /// Argument `index` of an invocation of `target` is missing or not of the type asked for.
        case argument(target: String, index: Int)
        /// A value that cannot be written as JSON.
        case unencodable
    }

    public let code: Code
    public let message: String
    /// Where in the JSON text a syntax error was found, when that is the cause.
    public let detail: String?

    public init(_ message: String, detail: String? = nil, code: Code = .invalidMessage) {
        self.code = code
        self.message = message
        self.detail = detail
    }

    init(_ syntax: JSONSyntaxError) {
        self.init(syntax.message, detail: syntax.description)
    }

    public var description: String { detail.map { "\(message) (\($0))" } ?? message }

    static func missing(_ property: String) -> HubProtocolError {
        HubProtocolError("Missing required property '\(property)'.")
    }

    static func expected(_ property: String, _ type: String) -> HubProtocolError {
        HubProtocolError("Expected '\(property)' to be of type \(type).")
    }

    static func unexpectedToken(_ value: JSONValue, expected: String) -> HubProtocolError {
        HubProtocolError("Unexpected JSON Token Type '\(value.tokenTypeName)'. Expected a JSON \(expected).")
    }
}
