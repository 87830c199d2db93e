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
    // What lws says when a loop turns its proxy off on purpose (an empty address: ProxyPolicy chose a direct
    // connection while `http_proxy` is set); every address the relay gives it has a port.
    if text.hasSuffix("http_proxy needs to be ads:port") {
        lwsLogger.debug("\(text) (no proxy for this loop)")
        return
    }
    if level & LLL_ERR != 0 {
        lwsLogger.error("\(text)")
    } else {
        lwsLogger.warning("\(text)")
    }
}
