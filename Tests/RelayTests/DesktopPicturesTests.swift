import Foundation
import Testing

@testable import Relay

/// Where the desktop popup's picture is written: only into a folder of this user's alone, never through a link.
@Suite struct DesktopPicturesTests {
    func runtime() throws -> String {
        let dir = FileManager.default.temporaryDirectory.appending(path: "pictures-\(UUID())").path
        try FileManager.default.createDirectory(
            atPath: dir, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        return dir
    }

    @Test func thePictureIsWrittenPrivatelyAndReplacedWhole() throws {
        let dir = try runtime()
        let pictures = DesktopPictures(environment: ["XDG_RUNTIME_DIR": dir])
        let path = try pictures.store([1, 2, 3], as: "chart-a.png")
        #expect(path == dir + "/allowance-relay/chart-a.png")
        _ = try pictures.store([4, 5], as: "chart-a.png")
        #expect(FileManager.default.contents(atPath: path) == Data([4, 5]))
        let files = try FileManager.default.contentsOfDirectory(atPath: dir + "/allowance-relay")
        #expect(files == ["chart-a.png"], "no part file left behind")
        let attributes = try FileManager.default.attributesOfItem(atPath: path)
        #expect(attributes[.posixPermissions] as? Int == 0o600)
        let folder = try FileManager.default.attributesOfItem(atPath: dir + "/allowance-relay")
        #expect(folder[.posixPermissions] as? Int == 0o700)
    }

    @Test func aFolderOthersCanReadOrALinkIsRefused() throws {
        let dir = try runtime()
        try FileManager.default.createDirectory(
            atPath: dir + "/allowance-relay", withIntermediateDirectories: false, attributes: [.posixPermissions: 0o755]
        )
        #expect(throws: DesktopPictures.Failure.self) {
            try DesktopPictures(environment: ["XDG_RUNTIME_DIR": dir]).store([1], as: "chart-a.png")
        }
        let other = try runtime()
        let elsewhere = try runtime()
        try FileManager.default.createSymbolicLink(atPath: other + "/allowance-relay", withDestinationPath: elsewhere)
        #expect(throws: DesktopPictures.Failure.self) {
            try DesktopPictures(environment: ["XDG_RUNTIME_DIR": other]).store([1], as: "chart-a.png")
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: elsewhere).isEmpty, "nothing written through it")
    }
}
