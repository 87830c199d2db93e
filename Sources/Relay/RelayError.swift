/// The Relay module's one error, as async-http-client has `HTTPClientError`: what went wrong (`code`, for code that
/// decides) and the sentence that says it (`message`, for people). Configuration mistakes are `ConfigError`s (a template's, `TemplateError`), and a
/// send's failure is a `DeliveryOutcome`: neither is thrown from here.
public struct RelayError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Code: Sendable, Equatable {
        /// A summary asked for that the configuration does not have.
        case noSuchSummary
        /// The desktop's session bus refused a call (no bus, no notification daemon).
        case desktopBus
    }

    public let code: Code
    public let message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { message }
}
