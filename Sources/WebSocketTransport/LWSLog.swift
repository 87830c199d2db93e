import CLibWebSockets
import Foundation
import Logging
import Synchronization

/// lws's own log lines, routed into swift-log (errors only: its warnings repeat what our typed errors say).
enum LWSLog {
    private static let installed: Bool = {
        clws_set_log(LLL_ERR, lwsLogLine)
        return true
    }()

    static func install() { _ = installed }
}

private let lwsLogger = Logger(label: "libwebsockets")

private func lwsLogLine(level: Int32, line: UnsafePointer<CChar>?) {
    guard let line else { return }
    let text = String(cString: line).trimmingCharacters(in: .whitespacesAndNewlines)
    if level & LLL_ERR != 0 {
        lwsLogger.error("\(text)")
    } else {
        lwsLogger.warning("\(text)")
    }
}
