import Foundation
import Testing

@testable import Relay

/// A popup shows the relay's own icon wherever the XDG base directories say icon themes live (the Debian package
/// installs it under /usr/share, install.sh under ~/.local/share or /usr/local/share), and a stock one only where
/// none is installed.
@Suite struct DesktopIconTests {
    @Test func theInstalledIconIsFoundInAnyDataDirectory() throws {
        let root = FileManager.default.temporaryDirectory.appending(path: "icon-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: root) }
        let empty = root.appending(path: "empty").path, themed = root.appending(path: "share").path
        let apps = themed + "/icons/hicolor/scalable/apps"
        try FileManager.default.createDirectory(atPath: apps, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: empty, withIntermediateDirectories: true)
        let sink = SinkConfig(name: "popups", kind: .desktop)
        let nowhere = ["XDG_DATA_HOME": empty, "XDG_DATA_DIRS": empty]
        #expect(DesktopSink.icon(sink, environment: nowhere) == "dialog-information")
        FileManager.default.createFile(atPath: apps + "/allowance-relay.svg", contents: Data("<svg/>".utf8))
        #expect(DesktopSink.icon(sink, environment: ["XDG_DATA_HOME": empty, "XDG_DATA_DIRS": "\(empty):\(themed)"]) == "allowance-relay")
        #expect(DesktopSink.icon(sink, environment: ["XDG_DATA_HOME": themed, "XDG_DATA_DIRS": empty]) == "allowance-relay")
        #expect(DesktopSink.icon(sink, environment: nowhere) == "dialog-information")
    }
}
