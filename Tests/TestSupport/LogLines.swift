import Logging
import Synchronization

/// The lines a log reader would see ("level message"), collected from a `Logger` made here.
public final class LogLines: Sendable {
    private let lines = Mutex<[String]>([])

    public init() {}

    public var all: [String] { lines.withLock { $0 } }

    public func logger(level: Logger.Level = .info) -> Logger {
        var logger = Logger(label: "test") { _ in Handler(sink: self) }
        logger.logLevel = level
        return logger
    }

    struct Handler: LogHandler {
        let sink: LogLines
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .info
        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }
        func log(event: LogEvent) {
            sink.lines.withLock { $0.append("\(event.level) \(event.message)") }
        }
    }
}
