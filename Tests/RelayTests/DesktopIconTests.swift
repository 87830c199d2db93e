import Config
import Foundation
import Testing

@testable import Relay

/// A popup shows the relay's own icon wherever the XDG base directories say icon themes live (the Debian package
/// installs it under /usr/share, install.sh under ~/.local/share or /usr/local/share), from a checkout its own file,
/// and a stock one only where there is neither.
@Suite struct DesktopIconTests {
    @Test func theInstalledIconIsFoundInAnyDataDirectory() throws {
        let root = FileManager.default.temporaryDirectory.appending(path: "icon-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: root) }
        let empty = root.appending(path: "empty").path
        let themed = root.appending(path: "share").path
        let apps = themed + "/icons/hicolor/scalable/apps"
        try FileManager.default.createDirectory(atPath: apps, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: empty, withIntermediateDirectories: true)
        let sink = SinkConfig(name: "popups", kind: .desktop)
        let nowhere = ["XDG_DATA_HOME": empty, "XDG_DATA_DIRS": empty]
        #expect(DesktopSink.icon(sink, environment: nowhere, executable: nil) == "dialog-information")
        // Run from a checkout: .build/<triple>/debug/allowance-relay finds deploy/icons/allowance-relay.svg above it.
        let checkout = root.appending(path: "checkout")
        try FileManager.default.createDirectory(
            at: checkout.appending(path: "deploy/icons"), withIntermediateDirectories: true)
        try FileManager.default.createDirectory(
            at: checkout.appending(path: ".build/x86_64-unknown-linux-gnu/debug"), withIntermediateDirectories: true)
        #expect(
            FileManager.default.createFile(
                atPath: checkout.appending(path: "deploy/icons/allowance-relay.svg").path, contents: Data("<svg/>".utf8)
            ))
        let built = checkout.appending(path: ".build/x86_64-unknown-linux-gnu/debug/allowance-relay")
        #expect(
            DesktopSink.icon(sink, environment: nowhere, executable: built)
                == checkout.appending(path: "deploy/icons/allowance-relay.svg").absoluteString)
        #expect(DesktopSink.icon(sink, environment: nowhere, executable: built).hasPrefix("file:///"))
        #expect(FileManager.default.createFile(atPath: apps + "/allowance-relay.svg", contents: Data("<svg/>".utf8)))
        #expect(
            DesktopSink.icon(
                sink, environment: ["XDG_DATA_HOME": empty, "XDG_DATA_DIRS": "\(empty):\(themed)"], executable: built)
                == "allowance-relay")
        #expect(
            DesktopSink.icon(sink, environment: ["XDG_DATA_HOME": themed, "XDG_DATA_DIRS": empty], executable: nil)
                == "allowance-relay")
        #expect(DesktopSink.icon(sink, environment: nowhere, executable: nil) == "dialog-information")
    }
}
