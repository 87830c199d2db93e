import Config
import Foundation
import Testing

/// A command reads its configuration file once: every part it takes comes from that reading.
@Suite struct ConfigSourceTests {
    @Test func aCommandsSourceIsReadOnceAndAnEditAfterThatIsNotMixedIn() throws {
        let dir = FileManager.default.temporaryDirectory.appending(path: "config-source-\(UUID())")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let file = dir.appending(path: "relay.yaml")
        try "store:\n  path: /tmp/first.sqlite\n".write(to: file, atomically: true, encoding: .utf8)
        let first = try RelaySettings.local(try ConfigSource.once(file: file.path).values())
        try "store:\n  path: /tmp/second.sqlite\n".write(to: file, atomically: true, encoding: .utf8)
        let again = try RelaySettings.local(try ConfigSource.once(file: file.path).values())
        #expect(first.storePath == "/tmp/first.sqlite" && again.storePath == "/tmp/first.sqlite")
        // A new source (a reload) reads the file as it is now.
        #expect(try RelaySettings.local(try ConfigSource(file: file.path).values()).storePath == "/tmp/second.sqlite")
    }

    @Test func aFileThatCannotBeReadIsItsErrorEachTimeItIsAsked() {
        let source = ConfigSource(file: "/nonexistent/relay.yaml", environment: [:])
        for _ in 0..<2 {
            #expect(throws: ConfigErrors.self) { try source.values() }
        }
    }
}
