/// The nine message types of the SignalR hub protocol (HubProtocol.md).
public enum HubMessage: Sendable, Equatable {
    case invocation(Invocation)
    case streamItem(StreamItem)
    case completion(Completion)
    case streamInvocation(Invocation)
    case cancelInvocation(invocationId: String, headers: [String: String] = [:])
    case ping
    case close(Close)
    /// Stateful reconnect: the peer has received every tracked message up to `sequenceId`.
    case ack(sequenceId: Int64)
    /// Stateful reconnect: the next tracked message the sender sends carries `sequenceId`.
    case sequence(sequenceId: Int64)

    /// Types 1 to 5 take part in stateful reconnect's numbering, acknowledgement and replay.
    public var isSequenced: Bool {
        switch self {
        case .invocation, .streamItem, .completion, .streamInvocation, .cancelInvocation: return true
        case .ping, .close, .ack, .sequence: return false
        }
    }

    /// An Invocation (type 1) or StreamInvocation (type 4).
    public struct Invocation: Sendable, Equatable {
        public var invocationId: String?
        public var target: String
        public var arguments: [JSONValue]
        public var streamIds: [String]
        public var headers: [String: String]

        public init(
            invocationId: String? = nil, target: String, arguments: [JSONValue], streamIds: [String] = [],
            headers: [String: String] = [:]
        ) {
            self.invocationId = invocationId
            self.target = target
            self.arguments = arguments
            self.streamIds = streamIds
            self.headers = headers
        }
    }

    public struct StreamItem: Sendable, Equatable {
        public var invocationId: String
        public var item: JSONValue
        public var headers: [String: String]

        public init(invocationId: String, item: JSONValue, headers: [String: String] = [:]) {
            self.invocationId = invocationId
            self.item = item
            self.headers = headers
        }
    }

    public struct Completion: Sendable, Equatable {
        public enum Outcome: Sendable, Equatable {
            /// No `result` and no `error`: a void method, or the end of a stream.
            case void
            /// `"result": null` is a result, not void.
            case result(JSONValue)
            case error(String)
        }

        public var invocationId: String
        public var outcome: Outcome
        public var headers: [String: String]

        public init(invocationId: String, outcome: Outcome, headers: [String: String] = [:]) {
            self.invocationId = invocationId
            self.outcome = outcome
            self.headers = headers
        }
    }

    public struct Close: Sendable, Equatable {
        /// Present means the server closed because of an error; `""` is still an error.
        public var error: String?
        public var allowReconnect: Bool

        public init(error: String? = nil, allowReconnect: Bool = false) {
            self.error = error
            self.allowReconnect = allowReconnect
        }
    }
}
