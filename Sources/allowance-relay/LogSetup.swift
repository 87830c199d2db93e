import AllowanceAPI
import Config
import Core
import Foundation
import Logging

/// Log lines to stderr: plain text (journald adds its own timestamps) or one JSON object per line.
enum LogSetup {
    static func bootstrap(level: Logger.Level, format: RelaySettings.LogFormat) {
        LoggingSystem.bootstrap { label in
            switch format {
            case .text:
                var h = StreamLogHandler.standardError(label: label)
                h.logLevel = level
                return h
            case .json:
                return JSONLogHandler(label: label, logLevel: level)
            }
        }
    }
}

struct JSONLogHandler: LogHandler {
    let label: String
    var logLevel: Logger.Level
    var metadata: Logger.Metadata = [:]

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        var fields: [(key: String, value: JSONValue)] = [
            ("ts", .string(Date.ISO8601FormatStyle(includingFractionalSeconds: true).format(Date()))),
            ("level", .string(event.level.rawValue)),
            ("label", .string(label)),
            ("msg", .string(event.message.description)),
        ]
        for (k, v) in metadata.merging(event.metadata ?? [:], uniquingKeysWith: { $1 }).sorted(by: { $0.key < $1.key })
        {
            // A value that is itself JSON (e.g. a hub event) is embedded as an object, not a string.
            let text = "\(v)"
            if text.hasPrefix("{"), let parsed = try? JSONValue(parsing: Array(text.utf8)) {
                fields.append((k, parsed))
            } else {
                fields.append((k, .string(text)))
            }
        }
        var line: [UInt8] = []
        JSONValue.object(fields).write(into: &line)
        line.append(0x0A)
        FileHandle.standardError.write(Data(line))
    }
}
